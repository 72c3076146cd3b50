"""ViT (ViTModel, ViTForImageClassification) <-> our EncoderOnly with an image front end
(model.vision).

ViT is a pre-norm encoder with GELU, a final LayerNorm, a learned [CLS] vector and learned
positions (one per patch and one for [CLS]), and patches projected by a stride-P convolution,
which is our patch projection with the kernel flattened (transformer.model.patches).
ViTForImageClassification puts a linear classifier on the final [CLS] state (no pooler);
ViTModel may carry a pooler (dense + tanh on [CLS]).
"""

from __future__ import annotations

from ...config import ModelConfig, VisionConfig
from ...model.build import build_model
from ...model.transformer import EncoderOnly
from .common import (
    HFConversionError,
    activation_from_hf,
    activation_to_hf,
    load_weights,
    require,
    unsupported,
    weights_of,
)

CLASSES = ("ViTModel", "ViTForImageClassification")


def _heads(hf_model) -> tuple[bool, int]:
    """(pooler, n_classes) of a transformers ViT model."""
    match type(hf_model).__name__:
        case "ViTModel":
            return hf_model.pooler is not None, 0
        case "ViTForImageClassification":
            return False, hf_model.config.num_labels
    raise HFConversionError(
        f"{type(hf_model).__name__} is not supported: pass one of {', '.join(CLASSES)}"
    )


def config_from_hf(c, pooler: bool = False, n_classes: int = 0) -> ModelConfig:
    """A ViTConfig (+ the heads present) -> our ModelConfig; errors name the ViT field."""
    size = c.image_size if isinstance(c.image_size, int) else tuple(c.image_size)
    patch = c.patch_size if isinstance(c.patch_size, int) else tuple(c.patch_size)
    if not isinstance(size, int) or not isinstance(patch, int):
        raise unsupported(
            "image_size",
            c.image_size,
            "our image encoder takes square images and patches (one int each)",
        )
    if getattr(c, "pooler_act", "tanh") != "tanh" or getattr(c, "pooler_output_size", None) not in (
        None,
        c.hidden_size,
    ):
        raise unsupported(
            "pooler_act",
            getattr(c, "pooler_act", None),
            "our pooler is dense (d_model -> d_model) + tanh",
        )
    if not getattr(c, "qkv_bias", True):
        raise unsupported(
            "qkv_bias", False, "our attention has biases on q, k, v together with the other linears"
        )
    return ModelConfig(
        arch="encoder",
        vocab_size=1,  # no tokens: the patches are the input
        d_model=c.hidden_size,
        n_heads=c.num_attention_heads,
        n_encoder_layers=c.num_hidden_layers,
        n_decoder_layers=0,
        d_ff=c.intermediate_size,
        dropout=float(c.hidden_dropout_prob),
        attention_dropout=float(c.attention_probs_dropout_prob),
        norm_position="pre",
        norm="layernorm",
        norm_eps=c.layer_norm_eps,
        final_norm=True,
        positional="none",
        max_positions=(size // patch) ** 2 + 1,
        activation=activation_from_hf("hidden_act", c.hidden_act),
        bias=True,
        tie_embeddings=False,
        scale_embedding=False,
        pooler=pooler,
        pooling="first",
        n_classes=n_classes,
        pad_id=0,
        bos_id=0,
        eos_id=0,
        vision=VisionConfig(
            image_size=size, patch_size=patch, channels=c.num_channels, positions="learned"
        ),
    )


def config_to_hf(cfg: ModelConfig):
    """Our ModelConfig -> a ViTConfig, or an error naming the field ViT cannot express."""
    from transformers import ViTConfig

    family = "ViT"
    require(
        cfg.vision is not None,
        "vision",
        cfg.vision,
        family,
        "ViT is an image encoder (set model.vision)",
    )
    v = cfg.vision
    require(
        cfg.norm_position == "pre", "norm_position", cfg.norm_position, family, "ViT is pre-norm"
    )
    require(cfg.norm == "layernorm", "norm", cfg.norm, family, "ViT uses LayerNorm")
    require(cfg.use_final_norm, "final_norm", cfg.final_norm, family, "ViT has a final LayerNorm")
    require(cfg.bias, "bias", cfg.bias, family, "ViT's layers have biases")
    require(
        cfg.kv_heads == cfg.n_heads,
        "n_kv_heads",
        cfg.n_kv_heads,
        family,
        "ViT has no grouped-query attention",
    )
    require(
        v.positions == "learned",
        "vision.positions",
        v.positions,
        family,
        "ViT learns its positions",
    )
    require(
        cfg.pooling == "first", "pooling", cfg.pooling, family, "ViT classifies the [CLS] state"
    )
    require(
        not (cfg.pooler and cfg.n_classes),
        "pooler",
        cfg.pooler,
        family,
        "ViTForImageClassification has no pooler between [CLS] and the classifier",
    )
    return ViTConfig(
        hidden_size=cfg.d_model,
        num_hidden_layers=cfg.n_encoder_layers,
        num_attention_heads=cfg.n_heads,
        intermediate_size=cfg.d_ff,
        hidden_act=activation_to_hf(cfg.activation, family),
        hidden_dropout_prob=cfg.dropout,
        attention_probs_dropout_prob=cfg.attention_dropout,
        layer_norm_eps=cfg.norm_eps,
        image_size=v.image_size,
        patch_size=v.patch_size,
        num_channels=v.channels,
        qkv_bias=True,
        num_labels=max(cfg.n_classes, 1),
    )


# Layer tensor names: transformers 5 (layers.i.attention.q_proj, mlp.fc1) and 4
# (encoder.layer.i.attention.attention.query)
LAYER_NAMES = {
    5: (
        "layers",
        (
            ("self_attn.q_proj", "attention.q_proj"),
            ("self_attn.k_proj", "attention.k_proj"),
            ("self_attn.v_proj", "attention.v_proj"),
            ("self_attn.out_proj", "attention.o_proj"),
            ("norm1", "layernorm_before"),
            ("feed_forward.w1", "mlp.fc1"),
            ("feed_forward.w2", "mlp.fc2"),
            ("norm2", "layernorm_after"),
        ),
    ),
    4: (
        "encoder.layer",
        (
            ("self_attn.q_proj", "attention.attention.query"),
            ("self_attn.k_proj", "attention.attention.key"),
            ("self_attn.v_proj", "attention.attention.value"),
            ("self_attn.out_proj", "attention.output.dense"),
            ("norm1", "layernorm_before"),
            ("feed_forward.w1", "intermediate.dense"),
            ("feed_forward.w2", "output.dense"),
            ("norm2", "layernorm_after"),
        ),
    ),
}


def _layout(hf_state: dict, prefix: str) -> int:
    return 5 if f"{prefix}layers.0.layernorm_before.weight" in hf_state else 4


def _pairs(cfg: ModelConfig, prefix: str, layout: int) -> list[tuple[str, str]]:
    """(our name, ViT name) for every tensor except the patch projection's weight (reshaped, see
    from_hf/to_hf); prefix is "" for ViTModel, "vit." for ViTForImageClassification; layout: the
    transformers major version's names."""
    e = f"{prefix}embeddings"
    pairs = [
        ("encoder.patches.cls", f"{e}.cls_token"),
        ("encoder.patches.positions", f"{e}.position_embeddings"),
        ("encoder.patches.projection.bias", f"{e}.patch_embeddings.projection.bias"),
        ("encoder.final_norm.weight", f"{prefix}layernorm.weight"),
        ("encoder.final_norm.bias", f"{prefix}layernorm.bias"),
    ]
    stack, names = LAYER_NAMES[layout]
    for i in range(cfg.n_encoder_layers):
        ours, theirs = f"encoder.layers.{i}", f"{prefix}{stack}.{i}"
        for mine, name in names:
            pairs += [(f"{ours}.{mine}.{p}", f"{theirs}.{name}.{p}") for p in ("weight", "bias")]
    if cfg.pooler:
        pairs += [(f"pooler.dense.{p}", f"{prefix}pooler.dense.{p}") for p in ("weight", "bias")]
    if cfg.n_classes:
        pairs += [(f"pooler.classifier.{p}", f"classifier.{p}") for p in ("weight", "bias")]
    return pairs


PROJECTION = "encoder.patches.projection.weight"


def _prefix(hf_model) -> str:
    return "" if type(hf_model).__name__ == "ViTModel" else "vit."


def from_hf(hf_model) -> EncoderOnly:
    """A transformers ViT model -> our image EncoderOnly with the same hidden states and logits."""
    cfg = config_from_hf(hf_model.config, *_heads(hf_model))
    theirs = weights_of(hf_model)
    prefix = _prefix(hf_model)
    tensors = {ours: theirs[name] for ours, name in _pairs(cfg, prefix, _layout(theirs, prefix))}
    # (C, channels, patch, patch) -> (C, channels * patch * patch), as model/patches.py says
    conv = theirs[f"{prefix}embeddings.patch_embeddings.projection.weight"]
    tensors[PROJECTION] = conv.reshape(conv.size(0), -1)
    model = build_model(cfg)
    load_weights(model, tensors, "ViT -> EncoderOnly")
    return model.eval()


def to_hf(model: EncoderOnly):
    """Our image EncoderOnly (ViT shaped) -> ViTModel or ViTForImageClassification."""
    import transformers

    cfg = model.config
    hf_config = config_to_hf(cfg)
    if cfg.n_classes:
        hf_model = transformers.ViTForImageClassification(hf_config)
    else:
        hf_model = transformers.ViTModel(hf_config, add_pooling_layer=cfg.pooler)
    ours = weights_of(model)
    prefix = _prefix(hf_model)
    tensors = {
        name: ours[mine]
        for mine, name in _pairs(cfg, prefix, _layout(hf_model.state_dict(), prefix))
    }
    v = cfg.vision
    tensors[f"{prefix}embeddings.patch_embeddings.projection.weight"] = ours[PROJECTION].reshape(
        cfg.d_model, v.channels, v.patch_size, v.patch_size
    )  # (C, channels, patch, patch)
    load_weights(hf_model, tensors, "EncoderOnly -> ViT")
    return hf_model.eval()
