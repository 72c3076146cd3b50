"""A tiny untrained detector (DETR) as a model directory, for the tests of what draws and serves its
objects: 32 x 32 images, stride 8 (a 4 x 4 feature map), 5 object queries, 3 classes."""

import torch

from transformer.config import ModelConfig
from transformer.model.build import build_model
from transformer.model_dir import save_model

LABELS = ["cat", "dog", "bird"]


def tiny_detector(path, channels: int = 1, bias: dict[int, float] | None = None, seed: int = 0):
    """The model directory at path. bias adds to the class head's bias, {class index: value}
    (index 3 is "no object"): +8 on a class makes every query find it with a probability near 1,
    +8 on "no object" makes them find nothing."""
    cfg = ModelConfig(
        arch="encoder-decoder",
        d_model=32,
        n_heads=4,
        d_ff=64,
        n_encoder_layers=1,
        n_decoder_layers=2,
        dropout=0.0,
        positional="none",
        vocab_size=1,
        pad_id=0,
        bos_id=0,
        eos_id=0,
        n_classes=len(LABELS),
        detection=dict(
            image_size=32, stride=8, n_queries=5, backbone_channels=8, channels=channels
        ),
    )
    torch.manual_seed(seed)
    model = build_model(cfg)
    with torch.no_grad():
        for index, value in (bias or {}).items():
            model.class_head.bias[index] += value
    return save_model(model, path, labels=LABELS)
