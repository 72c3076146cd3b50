"""Plots: training curves (curves.py) and attention heatmaps (attention.py)."""
