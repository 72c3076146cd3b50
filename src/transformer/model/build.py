"""`build_model`, the one place that reads a whole ModelConfig: it assembles the stacks and heads
that the config describes (a `match` on its values, no registry), initialises and ties them.
"""

from __future__ import annotations

import math

from torch import nn

from ..config import ModelConfig
from .attention import MultiHeadAttention
from .audio import AudioFrontEnd
from .contrastive import DualEncoder
from .detection import DetectionTransformer
from .detection_parts import ConvBackbone, DenseHead, PatchBackbone
from .heads import MaskedLMHead, PooledClassifier, SentenceHead, SpanHead
from .layers import DecoderLayer, EncoderLayer, FeedForward, make_norm
from .patches import PatchEmbedding
from .positional import LearnedPositions, RelativePositionBias, RotaryEmbedding, SinusoidalPositions
from .stacks import AudioEncoder, Decoder, Embeddings, Encoder, ImageEncoder
from .transformer import DecoderOnly, EncoderDecoder, EncoderOnly, Model


def build_model(cfg: ModelConfig) -> Model:
    """Assemble the model that `cfg` describes; the only function that reads a ModelConfig."""
    if not isinstance(cfg, ModelConfig):
        raise TypeError(
            f"build_model takes a ModelConfig, not {type(cfg).__name__}: build one with "
            "ModelConfig(...), a preset such as transformer.config.cpu_tiny(), "
            "or ModelConfig.from_dict(values)"
        )
    match cfg.arch:
        case "encoder-decoder" if cfg.detection is not None:
            model = _detector(cfg)
        case "encoder-decoder":
            if cfg.audio is not None:  # Whisper: log-mel frames in, no source tokens
                tgt_tokens = nn.Embedding(cfg.target_vocab_size, cfg.d_model)
                encoder = _audio_encoder(cfg)
            elif cfg.vision is not None:  # a captioner: ViT's patches in, no source tokens
                tgt_tokens = nn.Embedding(cfg.target_vocab_size, cfg.d_model)
                encoder = _image_encoder(cfg)
            else:
                src_tokens = nn.Embedding(cfg.vocab_size, cfg.d_model)
                tgt_tokens = (
                    src_tokens
                    if cfg.shares_embeddings
                    else nn.Embedding(cfg.target_vocab_size, cfg.d_model)
                )
                encoder = _encoder(cfg, src_tokens)
            lm_head = nn.Linear(cfg.d_model, cfg.target_vocab_size, bias=cfg.output_bias)
            ctc = None
            if cfg.audio is not None and cfg.audio.ctc:
                ctc = nn.Linear(cfg.d_model, cfg.target_vocab_size)
            model = EncoderDecoder(
                cfg, encoder, _decoder(cfg, tgt_tokens, cross=True), lm_head, ctc_head=ctc
            )
        case "decoder":
            tokens = nn.Embedding(cfg.vocab_size, cfg.d_model)
            lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=cfg.output_bias)
            model = DecoderOnly(cfg, _decoder(cfg, tokens, cross=False), lm_head)
        case "encoder" if cfg.contrastive is not None:  # CLIP: an image and a text tower
            c, t = cfg.contrastive, cfg.text_tower()
            text = _encoder(t, nn.Embedding(t.vocab_size, t.d_model))
            model = DualEncoder(
                cfg, _image_encoder(cfg), text, c.embed_dim, c.text_pooling, c.temperature
            )
        case "encoder":
            pooler = None
            if cfg.pooler or cfg.n_classes:
                pooler = PooledClassifier(
                    cfg.d_model, cfg.n_classes, cfg.dropout, cfg.pooling, dense=cfg.pooler
                )
            if cfg.vision is not None:
                model = EncoderOnly(cfg, _image_encoder(cfg), None, pooler)
            else:
                tokens = nn.Embedding(cfg.vocab_size, cfg.d_model)
                mlm = None
                if cfg.mlm_head:
                    mlm = MaskedLMHead(cfg.d_model, cfg.vocab_size, cfg.activation, cfg.norm_eps)
                spans = SpanHead(cfg.d_model) if cfg.span_head else None
                sentences = SentenceHead() if cfg.sentence_head else None
                model = EncoderOnly(cfg, _encoder(cfg, tokens), mlm, pooler, spans, sentences)
        case _:
            raise ValueError(f"unknown arch {cfg.arch!r}")
    init_weights(model, cfg)
    if isinstance(model, DetectionTransformer) and model.queries is not None:
        nn.init.normal_(model.queries.weight)  # DETR's N(0, 1) query embeddings
    tie_weights(model)
    return model


def init_weights(model: nn.Module, cfg: ModelConfig) -> None:
    """Xavier-uniform linear layers (as the reference implementations do), zero biases, unit norms.

    Token embeddings (and an untied output layer) get N(0, d_model^-1/2) when embeddings are
    scaled by sqrt(d_model): the scaled embedding then has unit variance per component, the
    same scale as the sinusoids it is added to, and a tied output layer maps a normalised
    hidden state (unit variance per component) to logits of variance about 1, so training
    starts from a near-uniform distribution (loss ~ ln V) instead of a saturated softmax.
    Without scaling (GPT/BERT style) embeddings get N(0, 0.02).
    """
    std = cfg.d_model**-0.5 if cfg.scale_embedding else 0.02
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=std)
    lm_head = getattr(model, "lm_head", None)
    if lm_head is not None and not cfg.tie_embeddings:
        nn.init.normal_(lm_head.weight, std=cfg.d_model**-0.5)
    if not cfg.scale_attention:  # T5 folds 1 / sqrt(d_k) into the query projection's initialisation
        for module in model.modules():
            if isinstance(module, MultiHeadAttention):
                module.q_proj.weight.data.mul_(module.qk_dim**-0.5)


def tie_weights(model: Model) -> None:
    """Share the output projection with the target token embedding (§3.4) when the config says
    so."""
    if not model.config.tie_embeddings or isinstance(model, (DetectionTransformer, DualEncoder)):
        return  # a detector has no token embeddings, a dual encoder no output layer
    if isinstance(model, EncoderOnly):
        if model.mlm_head is not None:
            model.mlm_head.decoder.weight = model.encoder.embed.tokens.weight
        return
    model.lm_head.weight = model.decoder.embed.tokens.weight


# --------------------------------------------------------------------------------------------
# The parts, each from the config fields it needs


def _embeddings(cfg: ModelConfig, tokens: nn.Embedding, token_types: int = 0) -> Embeddings:
    match cfg.positional:
        case "sinusoidal":
            positions = SinusoidalPositions(cfg.d_model, cfg.max_positions, cfg.sinusoidal_layout)
        case "learned":
            positions = LearnedPositions(cfg.d_model, cfg.max_positions)
        case _:  # rope (applied inside attention) or none
            positions = None
    return Embeddings(
        tokens,
        positions,
        scale=math.sqrt(cfg.d_model) if cfg.scale_embedding else 1.0,
        dropout=cfg.dropout,
        token_types=nn.Embedding(token_types, cfg.d_model) if token_types else None,
        norm=make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, cfg.bias)
        if cfg.embedding_norm
        else None,
    )


def _attention(
    cfg: ModelConfig, rotary: RotaryEmbedding | None, cross: bool = False
) -> MultiHeadAttention:
    return MultiHeadAttention(
        cfg.d_model,
        cfg.n_heads,
        cfg.kv_heads,
        cfg.bias,
        cfg.attention_dropout,
        cfg.attention_impl,
        None if cross else rotary,
        cfg.d_k,
        cfg.d_v,
        None if cfg.scale_attention else 1.0,
    )


def _relative(cfg: ModelConfig, bidirectional: bool) -> RelativePositionBias | None:
    r = cfg.relative_bias
    if r is None:
        return None
    return RelativePositionBias(cfg.n_heads, bidirectional, r.buckets, r.max_distance)


def _norm(cfg: ModelConfig) -> nn.Module:
    return make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, cfg.bias)


def _final_norm(cfg: ModelConfig) -> nn.Module | None:
    return _norm(cfg) if cfg.use_final_norm else None


def _ffn(cfg: ModelConfig) -> FeedForward:
    return FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.bias, cfg.activation_dropout)


def _rotary(cfg: ModelConfig) -> RotaryEmbedding | None:
    if cfg.positional != "rope":
        return None
    return RotaryEmbedding(cfg.qk_dim, cfg.max_positions, cfg.rope_base)


def _encoder_layers(cfg: ModelConfig, rotary: RotaryEmbedding | None) -> list[EncoderLayer]:
    pre = cfg.norm_position == "pre"
    return [
        EncoderLayer(_attention(cfg, rotary), _ffn(cfg), _norm(cfg), _norm(cfg), cfg.dropout, pre)
        for _ in range(cfg.n_encoder_layers)
    ]


def _encoder(cfg: ModelConfig, tokens: nn.Embedding) -> Encoder:
    layers = _encoder_layers(cfg, _rotary(cfg))
    return Encoder(
        _embeddings(cfg, tokens, cfg.n_token_types),
        layers,
        _final_norm(cfg),
        _relative(cfg, bidirectional=True),
    )


def _image_encoder(cfg: ModelConfig) -> ImageEncoder:
    v = cfg.vision
    layers = _encoder_layers(cfg, None)
    patches = PatchEmbedding(
        v.image_size, v.patch_size, v.channels, cfg.d_model, v.positions, cfg.dropout
    )
    return ImageEncoder(patches, layers, _final_norm(cfg))


def _audio_encoder(cfg: ModelConfig) -> AudioEncoder:
    a = cfg.audio
    front = AudioFrontEnd(a.n_mels, a.max_frames, cfg.d_model, a.positions, cfg.dropout, a.stride)
    return AudioEncoder(front, _encoder_layers(cfg, None), _final_norm(cfg))


def _decoder_layers(cfg: ModelConfig, rotary: RotaryEmbedding | None, cross: bool):
    pre = cfg.norm_position == "pre"
    return [
        DecoderLayer(
            _attention(cfg, rotary),
            _attention(cfg, rotary, cross=True) if cross else None,
            _ffn(cfg),
            _norm(cfg),
            _norm(cfg) if cross else None,
            _norm(cfg),
            cfg.dropout,
            pre,
        )
        for _ in range(cfg.n_decoder_layers)
    ]


def _decoder(cfg: ModelConfig, tokens: nn.Embedding, cross: bool) -> Decoder:
    layers = _decoder_layers(cfg, _rotary(cfg), cross)  # before the embeddings: the seed's order
    return Decoder(
        _embeddings(cfg, tokens), layers, _final_norm(cfg), _relative(cfg, bidirectional=False)
    )


def _detector(cfg: ModelConfig) -> DetectionTransformer:
    """DETR: its backbone, the encoder and decoder layers (no token embeddings), one norm on every
    decoder layer's output; with dense_aux, Co-DETR's training-only dense head on the memory."""
    d = cfg.detection
    if d.backbone == "cnn":
        backbone = ConvBackbone(
            d.channels, d.backbone_channels, d.stride.bit_length() - 1, cfg.d_model
        )
    else:
        backbone = PatchBackbone(d.channels, d.stride, cfg.d_model)
    return DetectionTransformer(
        cfg,
        backbone,
        _encoder_layers(cfg, None),
        _final_norm(cfg),
        _decoder_layers(cfg, None, cross=True),
        _norm(cfg),
        cfg.dropout,
        DenseHead(cfg.d_model, cfg.n_classes) if d.dense_aux else None,
    )
