"""What a task's models read, in words and in FLOPs: the line the trainer prints of a model's inputs
(`inputs`) and the lines `transformer info` prints of its cost (`cost`). Each task names its pair
in its Task record; text models read tokens (the defaults), image models patches, a detector a
backbone's feature map."""

from __future__ import annotations

from ..config import ModelConfig
from ..model.accounting import flops_per_image, flops_per_token

CAPTION_TOKENS = 16
"""The caption length a captioner's FLOPs per image are counted with."""


def tokens(cfg: ModelConfig) -> str:
    """A text model's inputs: its vocabulary."""
    return f"vocabulary {cfg.vocab_size}"


def patches(cfg: ModelConfig) -> str:
    """An image encoder's inputs: its patches."""
    v = cfg.vision
    return f"{v.n_patches} patches of {v.patch_size} x {v.patch_size} x {v.channels} per image"


def patches_and_tokens(cfg: ModelConfig) -> str:
    """A captioner's: the patches it reads and the vocabulary it writes."""
    return f"{patches(cfg)}, {tokens(cfg)}"


def feature_map(cfg: ModelConfig) -> str:
    """A detector's: its backbone's feature map, its object queries and classes."""
    d = cfg.detection
    return (
        f"{d.grid} x {d.grid} feature map ({d.backbone}) of {d.image_size} x {d.image_size} x "
        f"{d.channels} images, {d.n_queries} object queries, {cfg.n_classes} classes"
    )


def _flops(flops: dict[str, int]) -> str:
    return (
        f"forward {flops['forward']:,} ({flops['forward'] / 1e9:.3f} GFLOP), "
        f"training {flops['training']:,} ({flops['training'] / 1e9:.3f} GFLOP)"
    )


def per_token(cfg: ModelConfig, seq_len: int) -> list[str]:
    """A text model's FLOPs per token at seq_len (model.accounting's count)."""
    flops = flops_per_token(cfg, seq_len)
    return [f"FLOPs per token at sequence length {seq_len}: {_flops(flops)}"]


def per_image(cfg: ModelConfig, seq_len: int) -> list[str]:
    """An image encoder's FLOPs per image (a captioner's with a caption of CAPTION_TOKENS)."""
    v = cfg.vision
    caption = f" and a caption of {CAPTION_TOKENS} tokens" if cfg.arch == "encoder-decoder" else ""
    flops = flops_per_image(cfg, caption_tokens=CAPTION_TOKENS)
    return [
        f"FLOPs per image ({v.n_patches} patches of {v.patch_size} x {v.patch_size} + [CLS]"
        f"{caption}): {_flops(flops)}"
    ]


def per_image_and_token(cfg: ModelConfig, seq_len: int) -> list[str]:
    """A dual encoder's: its image tower per image, its text tower per token."""
    return [*per_image(cfg, seq_len), "text tower: " + per_token(cfg.text_tower(), seq_len)[0]]


def per_detection(cfg: ModelConfig, seq_len: int) -> list[str]:
    """A detector's FLOPs per image: backbone, encoder over the feature map, decoder over the
    object queries."""
    d = cfg.detection
    return [
        f"FLOPs per image ({d.grid} x {d.grid} feature map from a {d.backbone} backbone, "
        f"{d.n_queries} object queries): {_flops(flops_per_image(cfg))}"
    ]
