"""Plots: training curves (curves.py), attention heatmaps (attention.py), attention over images
(image_attention.py), a detector's queries' attention (detection_attention.py) and confusion
matrices (confusion.py); each figure is written by common.py's save_figure. A detector's boxes
drawn on its image: boxes.py (Pillow, no matplotlib)."""
