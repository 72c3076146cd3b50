"""detection: object detection as set prediction (DETR, Carion et al. 2020), its objective and
its losses.

    objective.py    Detection: the data, batches, loss and validation of a DETR run
    set_loss.py     DETR's set prediction loss (Hungarian matching), DN-DETR's denoising loss
    dense_loss.py   a dense one-to-many detection loss (CenterNet's heatmaps; Co-DETR's aux head)
"""
