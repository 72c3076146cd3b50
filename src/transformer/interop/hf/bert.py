"""BERT (BertModel, BertForMaskedLM, BertForSequenceClassification, BertForPreTraining,
BertForQuestionAnswering) <-> our EncoderOnly.

BERT is a post-norm encoder with learned positions, token-type (segment) embeddings, a
LayerNorm on the summed embeddings, GELU, and optional heads: the pooler (dense + tanh on
the first token, with a classifier on top) and the masked-LM head. BertForPreTraining's
next-sentence head is a 2-class classifier on the pooled output; BertForQuestionAnswering's
qa_outputs (a start and an end logit per token) is our span head.
"""

from __future__ import annotations

from ...config import ModelConfig
from ...model.build import build_model
from ...model.transformer import EncoderOnly
from .common import (
    HFConversionError,
    activation_from_hf,
    activation_to_hf,
    first_id,
    load_weights,
    require,
    unsupported,
    weights_of,
)

CLASSES = (
    "BertModel",
    "BertForMaskedLM",
    "BertForSequenceClassification",
    "BertForPreTraining",
    "BertForQuestionAnswering",
)


def _heads(hf_model) -> tuple[bool, bool, int, bool]:
    """(mlm_head, pooler, n_classes, span_head) of a transformers BERT model."""
    name = type(hf_model).__name__
    match name:
        case "BertModel":
            return False, hf_model.pooler is not None, 0, False
        case "BertForMaskedLM":
            return True, False, 0, False
        case "BertForSequenceClassification":
            return False, True, hf_model.config.num_labels, False
        case "BertForPreTraining":
            return True, True, 2, False
        case "BertForQuestionAnswering":
            if hf_model.config.num_labels != 2:
                raise unsupported(
                    "num_labels",
                    hf_model.config.num_labels,
                    "a span head has a start and an end logit (2)",
                )
            return False, False, 0, True
    raise HFConversionError(f"{name} is not supported: pass one of {', '.join(CLASSES)}")


def config_from_hf(
    c, mlm_head: bool = False, pooler: bool = False, n_classes: int = 0, span_head: bool = False
) -> ModelConfig:
    """A BertConfig (+ the heads present) -> our ModelConfig; errors name the BERT field."""
    position_type = getattr(c, "position_embedding_type", "absolute")
    if position_type != "absolute":
        raise unsupported(
            "position_embedding_type", position_type, "our learned positions are absolute"
        )
    if getattr(c, "is_decoder", False) or getattr(c, "add_cross_attention", False):
        raise unsupported(
            "is_decoder", True, "our encoder-only model is bidirectional without cross-attention"
        )
    activation = activation_from_hf("hidden_act", c.hidden_act)
    if mlm_head and activation not in ("gelu", "gelu_tanh"):
        raise unsupported(
            "hidden_act", c.hidden_act, "our masked-LM head applies GELU (gelu or gelu_new)"
        )
    if c.type_vocab_size < 1:
        raise unsupported(
            "type_vocab_size", c.type_vocab_size, "BERT needs at least one token type"
        )
    pad = c.pad_token_id if c.pad_token_id is not None else 0
    bos, eos = c.bos_token_id, first_id(c.eos_token_id)
    return ModelConfig(
        arch="encoder",
        vocab_size=c.vocab_size,
        d_model=c.hidden_size,
        n_heads=c.num_attention_heads,
        n_encoder_layers=c.num_hidden_layers,
        n_decoder_layers=0,
        d_ff=c.intermediate_size,
        dropout=float(c.hidden_dropout_prob),
        attention_dropout=float(c.attention_probs_dropout_prob),
        norm_position="post",
        norm="layernorm",
        norm_eps=c.layer_norm_eps,
        final_norm=False,
        positional="learned",
        max_positions=c.max_position_embeddings,
        activation=activation,
        bias=True,
        tie_embeddings=bool(c.tie_word_embeddings),
        scale_embedding=False,
        embedding_norm=True,
        n_token_types=c.type_vocab_size,
        mlm_head=mlm_head,
        pooler=pooler,
        span_head=span_head,
        n_classes=n_classes,
        pad_id=pad,
        bos_id=bos if bos is not None else pad,
        eos_id=eos if eos is not None else pad,
    )


def config_to_hf(cfg: ModelConfig):
    """Our ModelConfig -> a BertConfig, or an error naming the field BERT cannot express."""
    from transformers import BertConfig

    family = "BERT"
    require(cfg.arch == "encoder", "arch", cfg.arch, family, "BERT is encoder-only")
    require(
        cfg.norm_position == "post", "norm_position", cfg.norm_position, family, "BERT is post-norm"
    )
    require(cfg.norm == "layernorm", "norm", cfg.norm, family, "BERT uses LayerNorm")
    require(not cfg.use_final_norm, "final_norm", cfg.final_norm, family, "BERT has no final norm")
    require(
        cfg.positional == "learned",
        "positional",
        cfg.positional,
        family,
        "BERT uses learned positions",
    )
    require(
        cfg.embedding_norm,
        "embedding_norm",
        cfg.embedding_norm,
        family,
        "BERT normalises the summed embeddings",
    )
    require(
        cfg.n_token_types >= 1,
        "n_token_types",
        cfg.n_token_types,
        family,
        "BERT has token-type embeddings",
    )
    require(cfg.bias, "bias", cfg.bias, family, "BERT's layers have biases")
    require(
        not cfg.scale_embedding,
        "scale_embedding",
        cfg.scale_embedding,
        family,
        "BERT does not scale embeddings",
    )
    require(
        cfg.kv_heads == cfg.n_heads,
        "n_kv_heads",
        cfg.n_kv_heads,
        family,
        "BERT has no grouped-query attention",
    )
    require(
        not cfg.sentence_head,
        "sentence_head",
        cfg.sentence_head,
        family,
        "a sentence head (a learned scale and bias on cosines of mean-pooled embeddings) has no "
        "transformers class",
    )
    require(
        cfg.pooling == "first", "pooling", cfg.pooling, family, "BERT pools the first token ([CLS])"
    )
    require(
        cfg.pooler or not cfg.n_classes,
        "pooler",
        cfg.pooler,
        family,
        "BertForSequenceClassification's classifier reads the pooler's output",
    )
    if cfg.span_head:
        require(
            not (cfg.mlm_head or cfg.pooler or cfg.n_classes),
            "span_head",
            cfg.span_head,
            family,
            "BertForQuestionAnswering has the span head alone (no masked-LM head, pooler or "
            "classifier)",
        )
    if cfg.mlm_head and cfg.pooler:
        require(
            cfg.n_classes == 2,
            "n_classes",
            cfg.n_classes,
            family,
            "a model with both heads is BertForPreTraining, whose pooled classifier has 2 classes",
        )
    return BertConfig(
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.d_model,
        num_hidden_layers=cfg.n_encoder_layers,
        num_attention_heads=cfg.n_heads,
        intermediate_size=cfg.d_ff,
        hidden_act=activation_to_hf(cfg.activation, family),
        hidden_dropout_prob=cfg.dropout,
        attention_probs_dropout_prob=cfg.attention_dropout,
        max_position_embeddings=cfg.max_positions,
        type_vocab_size=cfg.n_token_types,
        layer_norm_eps=cfg.norm_eps,
        pad_token_id=cfg.pad_id,
        tie_word_embeddings=cfg.tie_embeddings,
        num_labels=2 if cfg.span_head else max(cfg.n_classes, 1),
    )


def _pairs(cfg: ModelConfig, prefix: str, classifier: str) -> list[tuple[str, str]]:
    """(our name, BERT name) for every tensor; prefix is "" for BertModel, "bert." for the
    others."""
    e = f"{prefix}embeddings"
    pairs = [
        ("encoder.embed.tokens.weight", f"{e}.word_embeddings.weight"),
        ("encoder.embed.positions.weight", f"{e}.position_embeddings.weight"),
        ("encoder.embed.token_types.weight", f"{e}.token_type_embeddings.weight"),
        ("encoder.embed.norm.weight", f"{e}.LayerNorm.weight"),
        ("encoder.embed.norm.bias", f"{e}.LayerNorm.bias"),
    ]
    for i in range(cfg.n_encoder_layers):
        ours, theirs = f"encoder.layers.{i}", f"{prefix}encoder.layer.{i}"
        for mine, name in (
            ("self_attn.q_proj", "attention.self.query"),
            ("self_attn.k_proj", "attention.self.key"),
            ("self_attn.v_proj", "attention.self.value"),
            ("self_attn.out_proj", "attention.output.dense"),
            ("norm1", "attention.output.LayerNorm"),
            ("feed_forward.w1", "intermediate.dense"),
            ("feed_forward.w2", "output.dense"),
            ("norm2", "output.LayerNorm"),
        ):
            pairs += [(f"{ours}.{mine}.{p}", f"{theirs}.{name}.{p}") for p in ("weight", "bias")]
    if cfg.pooler:
        pairs += [(f"pooler.dense.{p}", f"{prefix}pooler.dense.{p}") for p in ("weight", "bias")]
        if cfg.n_classes:
            pairs += [(f"pooler.classifier.{p}", f"{classifier}.{p}") for p in ("weight", "bias")]
    if cfg.mlm_head:
        pairs += [
            (f"mlm_head.{mine}.{p}", f"cls.predictions.{name}.{p}")
            for mine, name in (("dense", "transform.dense"), ("norm", "transform.LayerNorm"))
            for p in ("weight", "bias")
        ]
        pairs.append(("mlm_head.decoder.bias", "cls.predictions.decoder.bias"))
        if not cfg.tie_embeddings:
            pairs.append(("mlm_head.decoder.weight", "cls.predictions.decoder.weight"))
    if cfg.span_head:
        pairs += [(f"span_head.proj.{p}", f"qa_outputs.{p}") for p in ("weight", "bias")]
    return pairs


def _names(hf_model) -> tuple[str, str]:
    prefix = "" if type(hf_model).__name__ == "BertModel" else "bert."
    classifier = (
        "cls.seq_relationship" if type(hf_model).__name__ == "BertForPreTraining" else "classifier"
    )
    return prefix, classifier


def from_hf(hf_model) -> EncoderOnly:
    """A transformers BERT model -> our EncoderOnly with the same hidden states and heads."""
    cfg = config_from_hf(hf_model.config, *_heads(hf_model))
    theirs = weights_of(hf_model)
    tensors = {ours: theirs[name] for ours, name in _pairs(cfg, *_names(hf_model))}
    model = build_model(cfg)
    load_weights(model, tensors, "BERT -> EncoderOnly")
    return model.eval()


def to_hf(model: EncoderOnly):
    """Our EncoderOnly (BERT shaped) -> BertModel / BertForMaskedLM / BertForSequenceClassification
    / BertForPreTraining / BertForQuestionAnswering."""
    import transformers

    cfg = model.config
    hf_config = config_to_hf(cfg)
    if cfg.span_head:
        hf_model = transformers.BertForQuestionAnswering(hf_config)
    elif cfg.mlm_head and cfg.pooler:
        hf_model = transformers.BertForPreTraining(hf_config)
    elif cfg.mlm_head:
        hf_model = transformers.BertForMaskedLM(hf_config)
    elif cfg.n_classes:
        hf_model = transformers.BertForSequenceClassification(hf_config)
    else:
        hf_model = transformers.BertModel(hf_config, add_pooling_layer=cfg.pooler)
    ours = weights_of(model)
    tensors = {name: ours[mine] for mine, name in _pairs(cfg, *_names(hf_model))}
    load_weights(hf_model, tensors, "EncoderOnly -> BERT")
    return hf_model.eval()
