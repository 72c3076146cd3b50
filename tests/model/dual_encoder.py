"""What the dual-encoder tests share: a tiny untrained CLIP-style model directory (8 x 8 RGB images,
a character tokenizer trained on a few names), built in well under a second."""

from __future__ import annotations

from pathlib import Path

import torch

from transformer.config import ModelConfig
from transformer.data.tokenizer import ENCODER_SPECIALS, EncoderTokens, train_tokenizer
from transformer.model.build import build_model
from transformer.model_dir import save_model

NAMES = ["red square", "blue circle", "green bar", "top", "bottom"]


def tiny_config(vocab_size: int = 40, **contrastive) -> ModelConfig:
    """1 layer a tower, d_model 32, 8 x 8 RGB images in 2 x 2 patches of 4, embeddings of 16."""
    return ModelConfig(
        arch="encoder", vocab_size=vocab_size, d_model=32, n_heads=2, n_encoder_layers=1, d_ff=64,
        dropout=0.0, max_positions=64, pad_id=0, bos_id=2, eos_id=3,
        vision={"image_size": 8, "patch_size": 4, "channels": 3},
        contrastive={"embed_dim": 16, **contrastive},
    )  # fmt: skip


def tiny_dual_encoder_dir(
    path: Path, seed: int = 0, names: list[str] = NAMES, **contrastive
) -> Path:
    """An untrained dual encoder with its tokenizer and special tokens, saved at path."""
    tokenizer = train_tokenizer("char", names, 64, 1, ENCODER_SPECIALS)
    torch.manual_seed(seed)
    model = build_model(tiny_config(tokenizer.vocab_size, **contrastive))
    tokens = EncoderTokens(tokenizer)
    return save_model(model.eval(), path, tokenizer=tokenizer, special_tokens=tokens.record())
