"""LoRA adapters (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models"): the
`[train.lora]` section and the choice list of the products it can adapt (transformer.model.lora)."""

from __future__ import annotations

from dataclasses import dataclass

from .checks import ConfigError, check_settings, check_types, setting

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "out_proj", "w1", "w2", "w3", "lm_head")
"""The linear layers an adapter can wrap, by their names in every stack: attention's query, key,
value and output products (self- and cross-attention), the feed-forward's W1, W2 and the gated
W3, and the output layer."""


@dataclass(frozen=True)
class LoraConfig:
    """Low-rank adapters on a pretrained model (`[train.lora]`, with train.init_from): each chosen
    product W x becomes W x + (alpha / rank) B A x, with A (rank x in) and B (out x rank) trained
    and W frozen (B starts at zero, so step 0 is the pretrained model)."""

    rank: int = setting(8, gt=0)
    """r: the rank of each adapter's update B A."""
    alpha: float = setting(16.0, gt=0)
    """The update is scaled by alpha / rank (peft's lora_alpha)."""
    dropout: float = setting(0.0, ge=0, lt=1)
    """Dropout on the adapter's input (peft's lora_dropout)."""
    targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "out_proj")
    """Which products get adapters, by name: q_proj, k_proj, v_proj, out_proj (attention), w1, w2,
    w3 (the feed-forward; add them for "all linear layers"), lm_head (the output layer)."""

    def __post_init__(self) -> None:
        if isinstance(self.targets, list):  # from TOML / JSON
            object.__setattr__(self, "targets", tuple(self.targets))
        check_types(self, "train.lora")
        check_settings(self, "train.lora")
        unknown = [t for t in self.targets if t not in LORA_TARGETS]
        if unknown or not self.targets:
            raise ConfigError(
                f"train.lora.targets={list(self.targets)!r} is not valid: give one or more of "
                f"{', '.join(LORA_TARGETS)}"
            )
        if len(set(self.targets)) != len(self.targets):
            raise ConfigError(f"train.lora.targets={list(self.targets)!r} names a product twice")

    @property
    def scaling(self) -> float:
        return self.alpha / self.rank
