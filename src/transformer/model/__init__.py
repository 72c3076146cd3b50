"""The Transformer model library: masks, attention, positions, layers, the three model families.

One shape legend for every file of the library; each file's docstring repeats the letters it uses,
and a file that needs a new letter adds it here, never reusing one:

    B  batch (rows: sentences, or beam rows while decoding)
    S  source length; in attention, the keys' length
    T  target length; in attention, the queries' length
    L  the length of a sequence that is neither side (an encoder's or a language model's input)
    H  attention heads (query heads)
    K  key/value heads (K = H, or fewer under grouped-query attention)
    D  head dim (Dv: the values' head dim where it differs)
    C  d_model
    V  vocabulary
    P  patches of an image (ViT), or positions of a detector's feature map (DETR)
    F  audio frames
    Q  object queries of a detector (DETR)
    N  sentences and G beams per sentence (beam search's prefix tree: B = N * G)
    E  the shared embedding of a text-image dual encoder (model.contrastive.embed_dim)
    M  classes of a classifier or detector (n_classes; DETR's M + 1 counts "no object")
    O  objects (target boxes) in a batch of images (a detector's dense loss)
    I  IoU thresholds, R recall points, A area ranges (COCO's mAP: evaluation/detection.py)

The letters hold outside model/ too (training's losses, evaluation's metrics).

Other sizes are spelled out: d_ff, n_classes, max_positions, channels, height,
width, patch_size, grid.
"""
