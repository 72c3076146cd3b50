"""The nested family configs of a ModelConfig, each a `[model.X]` section with its own checks:
vision (ViT patches), audio (Whisper's front end), detection (DETR's head), relative bias (T5's
positions) and contrastive (CLIP's two towers); with the choice lists of their settings, and the
rules a family sets on the rest of [model] (check_contrastive, check_detection, text_tower_config).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .checks import ConfigError, check_settings, check_types, setting

VISION_POSITIONS = ("learned", "sinusoidal2d", "none")
"""Patch positions of an image encoder (transformer.model.patches)."""
AUDIO_POSITIONS = ("sinusoidal", "learned")
"""Frame positions of an audio encoder (transformer.model.audio)."""
DETECTION_BACKBONES = ("cnn", "patches")
"""What turns an image into a detector's feature map (transformer.model.detection)."""
DETECTION_QUERIES = ("learned", "anchors", "dense")
"""What a detector's object queries are (transformer.model.detection)."""
DETECTION_CLASS_LOSSES = ("softmax", "focal")
"""How a detector scores classes (transformer.training.objectives.detection.set_loss)."""
POOLINGS = ("first", "mean")
"""What a pooled embedding reads: the first ([CLS]) state or the mean over real tokens."""


@dataclass(frozen=True)
class VisionConfig:
    """The image front end of an encoder (ViT): `[model.vision]`. Images are channels x image_size x
    image_size; see transformer.model.patches."""

    image_size: int = setting(28, gt=0)
    """Height and width of the images, in pixels (square)."""
    patch_size: int = setting(4, gt=0)
    """Side of the square patches; image_size must be a multiple of it."""
    channels: int = setting(1, gt=0)
    """Colour channels: 1 (grayscale) or 3 (RGB)."""
    positions: str = setting("learned", choices=VISION_POSITIONS)
    """learned (ViT's), sinusoidal2d (fixed, row and column) or none."""

    def __post_init__(self) -> None:
        check_types(self, "model.vision")
        check_settings(self, "model.vision")
        if self.image_size % self.patch_size:
            raise ConfigError(
                f"model.vision.image_size={self.image_size} is not divisible by patch_size="
                f"{self.patch_size}: the patches must tile the image"
            )

    @property
    def n_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2


@dataclass(frozen=True)
class AudioConfig:
    """The speech front end of an encoder-decoder (Whisper): `[model.audio]`. The encoder reads a
    log-mel spectrogram (n_mels x frames, 100 frames a second) through two 1-D convolutions, the
    second with stride 2 (and the first too with stride = 4); see transformer.model.audio and
    transformer.data.audio."""

    n_mels: int = setting(80, gt=0)
    """Mel bands of the spectrogram (Whisper: 80; large-v3: 128)."""
    max_frames: int = setting(3000, ge=2)
    """Longest input in spectrogram frames (3000 = 30 s); the encoder has max_frames / stride
    positions."""
    stride: int = setting(2, choices=(2, 4))
    """Frames per encoder position: 2 (Whisper's: the second convolution has stride 2, 50
    positions a second) or 4 (both convolutions have stride 2, 25 a second: a quarter of the
    attention's cost, as the 4x subsampling of most CTC and conformer recognisers)."""
    positions: str = setting("sinusoidal", choices=AUDIO_POSITIONS)
    """sinusoidal (Whisper's fixed table, sines then cosines) or learned."""
    pad_to_max: bool = False
    """Pad every input to max_frames, as Whisper was trained (true for imported Whisper models);
    false: a batch is padded to its longest input and the padding is masked."""
    ctc: bool = False
    """A CTC head on the encoder (Graves et al. 2006): a linear layer to the target vocabulary, the
    padding id as CTC's blank, for an auxiliary loss in training (train.ctc_weight)."""

    def __post_init__(self) -> None:
        check_types(self, "model.audio")
        check_settings(self, "model.audio")
        if self.max_frames % self.stride:
            raise ConfigError(
                f"model.audio.max_frames={self.max_frames} must be a multiple of stride="
                f"{self.stride}: the convolutions divide the frames by it"
            )

    @property
    def n_positions(self) -> int:
        """Encoder positions after the strided convolutions."""
        return self.max_frames // self.stride

    def positions_of(self, frames):
        """Encoder positions of a clip of `frames` frames (an int, an array or a tensor): each
        stride-2 convolution (width 3, padding 1) gives ceil(n / 2)."""
        return (frames + self.stride - 1) // self.stride


@dataclass(frozen=True)
class DetectionConfig:
    """An object detector (DETR, Carion et al. 2020): `[model.detection]`, on an encoder-decoder.
    A backbone turns the image into a feature map (one position per stride x stride pixels), the
    encoder reads it with 2-D sinusoidal positions added in every attention, and the decoder turns
    n_queries learned object queries into a class (or "no object") and a box each; see
    transformer.model.detection. model.n_classes counts the object classes."""

    image_size: int = setting(96, gt=0)
    """Height and width the images are resized to, in pixels (square)."""
    channels: int = setting(1, gt=0)
    """Colour channels: 1 (grayscale) or 3 (RGB)."""
    backbone: str = setting("cnn", choices=DETECTION_BACKBONES)
    """cnn (DETR's ResNet role at CPU scale: stride-2 convolution stages) or patches (ViT's
    linear patch projection, no convolution at all)."""
    stride: int = setting(8, gt=0)
    """Pixels per feature-map position along each side: the cnn's 2^stages, the patches' side."""
    backbone_channels: int = setting(32, gt=0)
    """cnn: channels of the first stage, doubled at each further stage."""
    n_queries: int = setting(10, gt=0)
    """Object queries: the most objects one image can be given (DETR: 100)."""
    queries: str = setting("learned", choices=DETECTION_QUERIES)
    """learned: DETR's, a learned position embedding per query; anchors: each query owns a learned
    reference box, its position is the 2-D sinusoid of the box's centre (the keys' encoding, so a
    query can look near its anchor from the start) and it predicts its box relative to the anchor
    (Anchor DETR, DAB-DETR: Wang et al. 2022, Liu et al. 2022); dense (needs dense_aux): two-stage,
    the queries are chosen per image from the dense head's n_queries best feature-map cells, local
    peaks first, each starting from its cell's features with that cell's box as its reference box
    (the box's centre sinusoid as its position, its box predicted relative to it): Deformable
    DETR's two-stage queries, RT-DETR's query selection (Zhu et al. 2021, Zhao et al. 2024)."""
    refine_boxes: bool = False
    """With anchors or dense queries: each decoder layer predicts its box relative to the previous
    layer's box (detached) and its queries' positions move to that box's centre (Deformable DETR's
    iterative box refinement); without it every layer predicts relative to the first reference."""
    aux_loss: bool = True
    """Training: the set loss at every decoder layer's output, not only the last (DETR's
    auxiliary decoding losses)."""
    class_loss: str = setting("softmax", choices=DETECTION_CLASS_LOSSES)
    """softmax: DETR's, a softmax over the classes and "no object", cross entropy; focal: a sigmoid
    per class and no "no object" output, the focal loss (alpha 0.25, gamma 2) over every query
    and class, and the matching cost made of it, weighted 2 (Deformable DETR, DINO)."""
    no_object_weight: float = setting(0.1, ge=0, le=1)
    """Training: weight of the "no object" class in the class loss (DETR's eos_coef), against 1
    for the object classes (class_loss softmax)."""
    dense_aux: bool = False
    """Training: Co-DETR's auxiliary dense head on the encoder's output (a class heatmap and a box
    per feature-map position, CenterNet's targets and focal loss), weighted by dense_weight;
    inference uses it only to choose dense queries."""
    dense_weight: float = setting(1.0, ge=0)
    """Training: weight of the dense head's loss (per object, as the set loss) when dense_aux."""
    denoise_groups: int = setting(0, ge=0)
    """Training: groups of denoising queries beside the matching ones (DN-DETR, DINO): each group
    holds a noised copy of every object of the image, starting from its label's embedding at its
    noised box, and learns to give back the object, no matching needed; 0: none. Attention masks
    keep the matching queries from seeing them (transformer.model.denoise)."""
    denoise_box_noise: float = setting(0.4, ge=0, le=1)
    """Training: how far a denoising query's box is moved (its centre by up to this / 2 of its
    side) and scaled (by 1 +- up to this); DN-DETR's lambda."""
    denoise_label_noise: float = setting(0.2, ge=0, le=1)
    """Training: the chance a denoising query starts from a label drawn at random (DN-DETR: 0.2)."""

    def __post_init__(self) -> None:
        check_types(self, "model.detection")
        check_settings(self, "model.detection")
        if self.image_size % self.stride:
            raise ConfigError(
                f"model.detection.image_size={self.image_size} is not divisible by stride="
                f"{self.stride}: the feature map must tile the image"
            )
        if self.queries == "dense" and not self.dense_aux:
            raise ConfigError(
                'model.detection.queries = "dense" chooses the queries from the dense head: set '
                "model.detection.dense_aux = true"
            )
        if self.queries == "dense" and self.n_queries > self.grid**2:
            raise ConfigError(
                f"model.detection.n_queries={self.n_queries} dense queries, but the feature map "
                f"has {self.grid**2} cells to choose from: use at most {self.grid**2}"
            )
        if self.refine_boxes and self.queries == "learned":
            raise ConfigError(
                "model.detection.refine_boxes needs reference boxes: set model.detection.queries "
                'to "anchors" or "dense"'
            )
        if self.backbone == "cnn" and self.stride & (self.stride - 1):
            raise ConfigError(
                f"model.detection.stride={self.stride} must be a power of 2 for the cnn backbone "
                "(each stage halves the image): use 4, 8 or 16"
            )

    @property
    def grid(self) -> int:
        """Feature-map positions along each side."""
        return self.image_size // self.stride


@dataclass(frozen=True)
class RelativeBiasConfig:
    """T5's bucketed relative position bias (Raffel et al. 2020): `[model.relative_bias]`, used when
    positional = "t5_bias". A learned scalar per head and bucket of the distance key - query, added
    to the attention scores; see transformer.model.positional.relative_bucket."""

    buckets: int = setting(32, gt=0)
    """Buckets per direction set: half of them exact distances, the rest logarithmic up to
    max_distance. The encoder splits them between the two directions, the decoder uses them all for
    the past."""
    max_distance: int = setting(128, gt=0)
    """Distances from here on share the last bucket."""

    def __post_init__(self) -> None:
        check_types(self, "model.relative_bias")
        check_settings(self, "model.relative_bias")
        if self.buckets < 4:
            raise ConfigError(
                f"model.relative_bias.buckets={self.buckets} is too few: the encoder halves them "
                "per direction and each half needs exact and logarithmic buckets (use >= 4, T5: 32)"
            )
        if self.max_distance <= self.buckets // 4:
            raise ConfigError(
                f"model.relative_bias.max_distance={self.max_distance} must exceed buckets / 4 = "
                f"{self.buckets // 4}, the largest exact distance of the encoder's buckets"
            )


@dataclass(frozen=True)
class ContrastiveConfig:
    """A text-image dual encoder (CLIP, Radford et al. 2021): `[model.contrastive]`, on arch =
    "encoder" with [model.vision]. An image tower (the ViT of model.vision, pooled at [CLS]) and a
    text tower (the token encoder, pooled as text_pooling says), shaped by [model] alike unless
    text_tower gives the text tower its own sizes; each ends in a linear projection to embed_dim,
    L2-normalised. See transformer.model.contrastive."""

    embed_dim: int = setting(64, gt=0)
    """Size of the shared embedding both towers project to (CLIP: 512)."""
    text_pooling: str = setting("mean", choices=POOLINGS)
    """What the text tower's embedding reads: "mean" (the mean of the last layer over real tokens,
    the default: every token's state gets a direct gradient, which a small tower trained from
    scratch learns faster from) or "first" (the [CLS] state, BERT's)."""
    temperature: float = setting(0.07, gt=0, le=1)
    """The initial softmax temperature: the learned logit scale starts at log(1 / temperature)
    (CLIP's 0.07); the scale is clamped at 100."""
    text_tower: dict | None = None
    """The text tower's own shape, where it differs from [model]'s (which shapes the image tower):
    a table of [model] settings among TEXT_TOWER_SETTINGS, e.g. a pretrained sentence encoder's
    (`{d_model = 384, n_heads = 12, d_ff = 1536, norm_position = "post", ...}`) to load into it
    with train.init_parts. CLIP's towers differ in width too; None = the same as the image tower."""

    def __post_init__(self) -> None:
        check_types(self, "model.contrastive")
        check_settings(self, "model.contrastive")
        if self.text_tower is not None and not isinstance(self.text_tower, dict):
            raise ConfigError(
                f"model.contrastive.text_tower={self.text_tower!r} is not valid: give a table of "
                "[model] settings, e.g. {d_model = 384, n_heads = 12}"
            )
        for key in self.text_tower or ():
            if key not in TEXT_TOWER_SETTINGS:
                raise ConfigError(
                    f"model.contrastive.text_tower.{key} is not a text tower's setting: it takes "
                    f"{', '.join(TEXT_TOWER_SETTINGS)}"
                )


TEXT_TOWER_SETTINGS = (
    "d_model",
    "n_heads",
    "n_kv_heads",
    "d_k",
    "d_v",
    "n_encoder_layers",
    "d_ff",
    "dropout",
    "attention_dropout",
    "activation_dropout",
    "norm_position",
    "norm",
    "norm_eps",
    "final_norm",
    "positional",
    "max_positions",
    "rope_base",
    "activation",
    "bias",
    "scale_attention",
    "scale_embedding",
    "embedding_norm",
    "n_token_types",
)
"""What model.contrastive.text_tower may set: the [model] settings an encoder of tokens reads."""


def text_tower_config(cfg):
    """The ModelConfig of a dual encoder's text tower: `cfg` (a ModelConfig with model.contrastive)
    without the image front end, changed by model.contrastive.text_tower; a setting that does not
    fit is the one-line ConfigError of ModelConfig's checks, named under text_tower."""
    changes = cfg.contrastive.text_tower or {}
    try:
        return dataclasses.replace(cfg, vision=None, contrastive=None, **changes)
    except ConfigError as e:
        raise ConfigError(f"model.contrastive.text_tower: {e}") from None


def check_contrastive(cfg) -> None:
    """Rules of a text-image dual encoder (model.contrastive) on its ModelConfig `cfg`."""
    if cfg.arch != "encoder" or cfg.vision is None:
        raise ConfigError(
            'model.contrastive is a text tower beside an image encoder: set arch = "encoder" '
            "and a [model.vision] table"
        )
    if cfg.n_classes or cfg.pooler:
        raise ConfigError(
            "a dual encoder (model.contrastive) has projections, not a classifier: leave "
            "n_classes at 0 and pooler at false"
        )
    cfg.text_tower()  # the text tower's own settings must fit together


def check_detection(cfg) -> None:
    """Rules of an object detector (model.detection) on its ModelConfig `cfg`."""
    if cfg.arch != "encoder-decoder":
        raise ConfigError(
            f"model.detection is for arch='encoder-decoder' (DETR), not arch={cfg.arch!r}"
        )
    if cfg.audio is not None or cfg.vision is not None:
        raise ConfigError(
            "model.detection has its own image front end: remove [model.vision] / [model.audio]"
        )
    if cfg.d_model % 4:
        raise ConfigError(
            f"d_model={cfg.d_model} must be divisible by 4 for a detector's 2-D sinusoidal "
            "positions (sin/cos of row and column)"
        )
    if cfg.positional in ("rope", "t5_bias"):
        raise ConfigError(
            f"positional={cfg.positional!r} does not fit a detector: it adds 2-D sinusoids "
            'in every attention; set positional = "none"'
        )
