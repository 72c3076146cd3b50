"""A text-image dual encoder (CLIP, Radford et al. 2021, §2.4 and Figure 3): an image tower and a
text tower, each followed by a linear projection to one shared embedding size E and L2-normalised;
the similarity of an image and a text is the cosine of their embeddings times a learned scale.

Legend (model/__init__.py): B batch, L text length, P patches, C d_model, E the shared embedding
(model.contrastive.embed_dim).

- Image tower: the ViT of model.vision (ImageEncoder), its last layer read at [CLS] (CLIP's).
- Text tower: the token encoder (Encoder) over [CLS] text [SEP], bidirectional, its last layer
  read as text_pooling says: "mean" over the real tokens (the default) or "first" ([CLS]). CLIP's
  text tower is a causal Transformer read at [EOS]; a bidirectional encoder has no such privileged
  last position, and the mean gives every token's state a direct gradient.
- Both towers take ModelConfig's d_model, n_heads, d_ff, n_encoder_layers and so on, unless
  model.contrastive.text_tower gives the text tower its own (CLIP's towers differ in width; a
  pretrained sentence encoder keeps its shape): each projection reads its own tower's width.
- Projections: linear, no bias (CLIP's W_i and W_t).
- Temperature: logits = exp(logit_scale) * cos, logit_scale learned, starting at log(1 / 0.07)
  (model.contrastive.temperature) and the scale clamped at 100, as CLIP does (a clamped scale
  gets no gradient: like CLIP's, it stays at 100 once there).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..config import ModelConfig
from .masks import as_token_mask
from .stacks import Encoder, ImageEncoder

MAX_LOGIT_SCALE = 100.0
"""CLIP clamps exp(logit_scale) at 100 "to prevent scaling the logits by more than 100"."""


class DualEncoder(nn.Module):
    """Two towers and a learned temperature; forward gives the (B, B) image-text logits."""

    def __init__(
        self,
        config: ModelConfig,
        image_encoder: ImageEncoder,
        text_encoder: Encoder,
        embed_dim: int,
        text_pooling: str = "mean",
        temperature: float = 0.07,
    ):
        super().__init__()
        self.config = config
        self.image_encoder = image_encoder
        self.text_encoder = text_encoder
        text_width = text_encoder.embed.tokens.embedding_dim
        self.image_projection = nn.Linear(config.d_model, embed_dim, bias=False)
        self.text_projection = nn.Linear(text_width, embed_dim, bias=False)
        self.text_pooling = text_pooling
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1.0 / temperature)))

    def embed_images(self, pixels: torch.Tensor) -> torch.Tensor:
        """pixels (B, channels, height, width) in [-1, 1] -> unit embeddings (B, E)."""
        hidden = self.image_encoder(pixels)  # (B, 1 + P, C)
        return F.normalize(self.image_projection(hidden[:, 0]).float(), dim=-1)

    def embed_texts(self, ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """ids (B, L) of [CLS] text [SEP] rows, mask (B, L) True at real tokens (None = no
        padding) -> unit embeddings (B, E)."""
        mask = as_token_mask(mask, ids.shape, "mask")
        hidden = self.text_encoder(ids, mask)  # (B, L, C)
        if self.text_pooling == "first":
            pooled = hidden[:, 0]  # (B, C)
        elif mask is None:
            pooled = hidden.mean(dim=1)
        else:
            weights = mask.to(hidden.dtype).unsqueeze(-1)  # (B, L, 1)
            pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
        return F.normalize(self.text_projection(pooled).float(), dim=-1)

    def scale(self) -> torch.Tensor:
        """exp(logit_scale), clamped at MAX_LOGIT_SCALE: a scalar."""
        return self.logit_scale.float().exp().clamp(max=MAX_LOGIT_SCALE)

    def similarity(self, images: torch.Tensor, texts: torch.Tensor) -> torch.Tensor:
        """Unit embeddings (B, E) and (B', E) -> logits (B, B'): scale x cosine."""
        return self.scale() * images @ texts.T

    def forward(
        self, pixels: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """pixels (B, channels, height, width), ids and mask (B', L) -> logits (B, B'): row i is
        image i against every text, column j text j against every image."""
        return self.similarity(self.embed_images(pixels), self.embed_texts(ids, mask))
