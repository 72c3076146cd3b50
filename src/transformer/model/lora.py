"""LoRA (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models", §4.1): a frozen
pretrained product W x plus a trained low-rank update,

    h = W x + b + (alpha / r) * B (A dropout(x))          A: (r, in), B: (out, r)

A starts as Kaiming-uniform noise and B at zero (so the adapted model starts as the pretrained
one), as the paper and Hugging Face's peft initialise them. Only A and B (and any head the task
adds) are trained: the frozen weights need no gradient and no optimizer state.

The rules:
- `add_lora(model, config)` swaps each chosen `nn.Linear` (by its attribute name, LORA_TARGETS:
  q_proj ... lm_head, in every stack) for a `LoRALinear` that keeps the same `weight` and `bias`
  (the same state-dict names, so the base weights load as they are) and adds `lora_A`, `lora_B`.
- `merge_lora(model)` folds each update into its weight, W + (alpha / r) B A, and puts plain
  `nn.Linear`s back: the merged model gives the same outputs to float rounding, and everything
  that reads plain layers (quantization, fused projections, exports) works on it unchanged.
- An adapted model carries `model.adapter` (an `Adapter`): the LoRA settings, the base model
  directory it adapts and that directory's weights' SHA-256, and the names of the tensors it
  trains. A model directory of it holds those tensors only (model_dir.py: adapter.json and
  adapter.safetensors beside config.json), and reading it reads the base's weights back first.
- Cost: a product of rank r on a (out x in) weight adds r (in + out) parameters and
  2 r (in + out) FLOPs per token (two products: A x, then B of that; `lora_flops`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..config import LoraConfig


@dataclass(frozen=True)
class Adapter:
    """What an adapted model adapts: its LoRA settings, the base model directory (an absolute path)
    and the SHA-256 of its model.safetensors, and the names of the tensors it trains (the adapters
    and any new head), in the model's parameter order."""

    lora: LoraConfig
    base: str
    base_sha256: str
    trained: tuple[str, ...]

    def to_dict(self) -> dict:
        return {
            "lora": {**dataclasses.asdict(self.lora), "targets": list(self.lora.targets)},
            "base": self.base,
            "base_sha256": self.base_sha256,
            "trained": list(self.trained),
        }

    @classmethod
    def from_dict(cls, values: dict) -> Adapter:
        return cls(
            LoraConfig(**values["lora"]),
            str(values["base"]),
            str(values["base_sha256"]),
            tuple(values["trained"]),
        )


class LoRALinear(nn.Linear):
    """An nn.Linear (in -> out) with a low-rank update beside its frozen weight (module doc)."""

    def __init__(self, layer: nn.Linear, rank: int, alpha: float, dropout: float = 0.0):
        nn.Module.__init__(self)
        self.in_features, self.out_features = layer.in_features, layer.out_features
        self.weight, self.bias = layer.weight, layer.bias  # the same tensors: nothing is copied
        self.rank, self.scaling = rank, alpha / rank
        like = dict(device=layer.weight.device, dtype=layer.weight.dtype)
        self.lora_A = nn.Parameter(torch.empty(rank, layer.in_features, **like))
        self.lora_B = nn.Parameter(torch.zeros(layer.out_features, rank, **like))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))  # nn.Linear's (and peft's) init
        self.dropout = nn.Dropout(dropout) if dropout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., in) -> (..., out), the products on the rows flattened to 2-D."""
        rows = x.reshape(-1, self.in_features)  # (N, in)
        low = F.linear(self.dropout(rows), self.lora_A)  # (N, r)
        out = F.linear(rows, self.weight, self.bias)  # (N, out)
        # the update added by one addmm (out + update * scaling made three more (N, out) tensors a
        # product, and their churn held more than full fine-tuning: docs/benchmarks/training.md)
        out = torch.addmm(out, low, self.lora_B.t(), alpha=self.scaling)
        return out.reshape(*x.shape[:-1], self.out_features)

    def delta(self) -> torch.Tensor:
        """The update of the weight, (alpha / r) B A: (out, in)."""
        return (self.lora_B @ self.lora_A) * self.scaling

    def merged(self, scale: float = 1.0) -> nn.Linear:
        """A plain nn.Linear with the update (times `scale`) folded into the weight."""
        out = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None)
        with torch.no_grad():
            weight = self.weight.detach() + scale * self.delta().detach()
        out.weight = nn.Parameter(weight, requires_grad=self.weight.requires_grad)
        if self.bias is not None:
            out.bias = self.bias
        return out.to(weight.device)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, rank={self.rank}, scaling={self.scaling:g}"


def _targets(model: nn.Module, names: tuple[str, ...]) -> list[tuple[nn.Module, str, nn.Linear]]:
    """(parent, attribute, layer) of each nn.Linear attribute named in `names`, in module order."""
    found = []
    for parent in model.modules():
        for name in names:
            layer = getattr(parent, name, None)
            if isinstance(layer, nn.Linear) and not isinstance(layer, LoRALinear):
                found.append((parent, name, layer))
    return found


def add_lora(model: nn.Module, config: LoraConfig) -> list[str]:
    """Wrap each product config.targets names in a LoRALinear (in place); returns the wrapped
    layers' names. ValueError when the model has none of them."""
    names = {id(module): name for name, module in model.named_modules()}
    found = _targets(model, config.targets)
    if not found:
        raise ValueError(
            f"train.lora.targets={list(config.targets)} names no linear layer of this model"
        )
    shared: dict[int, int] = {}
    for _, parameter in model.named_parameters(remove_duplicate=False):
        shared[id(parameter)] = shared.get(id(parameter), 0) + 1
    for _, attribute, layer in found:
        if shared[id(layer.weight)] > 1:
            raise ValueError(
                f"{names[id(layer)]} shares its weight with the token embedding (tied): an update "
                f"of one would change the other; leave {attribute} out of train.lora.targets"
            )
    wrapped = []
    for parent, attribute, layer in found:
        wrapped.append(names[id(layer)])
        setattr(parent, attribute, LoRALinear(layer, config.rank, config.alpha, config.dropout))
    return wrapped


def merge_lora(model: nn.Module, scale: float = 1.0) -> nn.Module:
    """Fold every LoRALinear of `model` into a plain nn.Linear (in place) and drop
    `model.adapter`; returns the model. `scale` multiplies every update: 1 as trained, 0 the base
    model, between them a point on the line from the base to the fine-tuned weights (the weight
    interpolation of WiSE-FT, Wortsman et al. 2022; diffusers' lora_scale)."""
    for parent in list(model.modules()):
        for attribute, child in list(parent.named_children()):
            if isinstance(child, LoRALinear):
                setattr(parent, attribute, child.merged(scale))
    if getattr(model, "adapter", None) is not None:
        model.adapter = None
    return model


def lora_layers(model: nn.Module) -> list[LoRALinear]:
    return [m for m in model.modules() if isinstance(m, LoRALinear)]


def lora_flops(in_features: int, out_features: int, rank: int) -> int:
    """FLOPs per token that an adapter of rank r adds to an (out x in) product: A x is r x in
    multiply-adds, B of that out x r; two FLOPs each. (The scaling and the sum, out each, are not
    counted, as biases are not.)"""
    return 2 * rank * (in_features + out_features)
