"""The training recipe: the `[train]` section (TrainConfig), its defaults the paper's (§5.3, §5.4),
with the choice lists its settings take."""

from __future__ import annotations

from dataclasses import dataclass

from .checks import ConfigError, check_settings, check_types, from_values, setting
from .lora import LoraConfig
from .objectives import OBJECTIVES
from .parts import init_parts

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
"""Training precisions (transformer.runtime.precision)."""
DEVICES = ("auto", "cpu", "cuda")
SCHEDULES = ("inverse_sqrt", "cosine")


@dataclass(frozen=True)
class TrainConfig:
    """The training recipe (the `[train]` section). Defaults are the paper's (§5.3, §5.4)."""

    seed: int = setting(1, ge=0)
    """Seed of the model's initialisation, dropout and batch shuffling."""
    batch_tokens: int = setting(4096, gt=0)
    """Padded tokens per batch on each process (the paper: ~25,000 source + 25,000 target per
    step)."""
    accumulate: int = setting(1, gt=0)
    """Batches whose gradients are summed per optimiser step (effective batch = batch_tokens x
    accumulate x processes)."""
    max_steps: int = setting(100000, gt=0)
    """Stop after this many optimiser steps (the paper: 100,000 for base, 300,000 for big)."""
    max_epochs: int = setting(0, ge=0)
    """Stop after this many passes over the data (0 = no limit)."""
    max_minutes: float = setting(0.0, ge=0)
    """Stop cleanly after this many minutes of training, validation and checkpoints included (0 =
    no limit); the clock starts at the first step: preparing the data and probing the machine
    before it do not count."""
    task: str | None = None
    """The task this run trains, by its name in the table of tasks (transformer.tasks.TASKS:
    "translation", "language-modelling", ... or a task added to the table); it is written into
    the model directories the run saves (task.json), so that they run as that task. None: the
    task of the objective and its data."""
    objective: str | None = setting(None, choices=tuple(OBJECTIVES))
    """What to learn: "seq2seq" (translation, from train_src/train_tgt), "lm" (next token, arch =
    "decoder"), "mlm" (BERT's masked-LM, arch = "encoder", on train_text), "classify" (a label per
    text, arch = "encoder", on train_tsv), "span_corruption" (T5's pretraining, arch =
    "encoder-decoder", on train_text) or "qa" (extractive question answering: a span head on an
    encoder, on train_squad), "qa_sentences" (answer-sentence selection on the same data: a sentence
    head scores each sentence of the context), "speech" (speech recognition, arch =
    "encoder-decoder" with model.audio, on train_audio) or "detection" (object detection, DETR: arch
    = "encoder-decoder" with model.detection, on train_detection) or "image_lm" (images generated
    pixel by pixel, Image GPT: arch = "decoder", on train_images) or "contrastive" (a text-image
    dual encoder, CLIP: arch = "encoder" with model.vision and model.contrastive, on train_images,
    each image's text its label) or "caption" (image captioning: arch = "encoder-decoder" with
    model.vision, on train_images, each image's text its label) or "chat" (supervised fine-tuning of
    a chat model, train.init_from, on train_chat: the loss on the assistant's turns). None: from the
    data and arch (see RunConfig.objective)."""
    mlm_probability: float = setting(0.15, gt=0, lt=1)
    """mlm: share of tokens chosen for prediction; of those 80% become [MASK], 10% a random token,
    10% stay."""
    noise_density: float = setting(0.15, gt=0, lt=1)
    """span_corruption: share of each text's tokens hidden (T5: 0.15)."""
    mean_span: float = setting(3.0, ge=1)
    """span_corruption: mean length of a hidden span (T5: 3)."""
    init_from: str | None = None
    """A model directory to fine-tune from: its tokenizer and model config are used (a classifier
    takes only its head from [model]: pooling, pooler; the head is new)."""
    init_parts: dict | None = None
    """Parts of the model loaded from other model directories before the first step, a table of
    part = "MODEL_DIR" (that model's part of the same name) or part = {from = "MODEL_DIR", part =
    "ITS_PART"}; a part is a module path: image_encoder, text_encoder (a dual encoder), encoder,
    decoder. Shapes must match ([model] gives the source's sizes); a part that embeds tokens needs
    the source's tokenizer. With init_from, they replace those parts of its model
    (transformer.training.parts)."""
    lora: LoraConfig | None = None
    """LoRA adapters ([train.lora], with init_from): the pretrained weights stay frozen and only
    low-rank updates of the chosen products (and any new head) are trained and saved; the run's
    model directories hold the adapters and name the base model (see transformer.model.lora)."""
    freeze_encoder: bool = False
    """With init_from, the pretrained encoder stays as it is: a classifier trains its new head only,
    a speech model its decoder only."""
    schedule: str = setting("inverse_sqrt", choices=SCHEDULES)
    """inverse_sqrt: the paper's warmup then step^-0.5 decay (§5.3); cosine: linear warmup then
    cosine to min_lr, reached at max_steps or at the end of max_minutes, whichever comes first
    (under a time budget the decay follows the clock, so it ends when the run does)."""
    warmup_steps: int = setting(4000, ge=0)
    """Steps of linear warmup (the paper: 4000)."""
    lr_factor: float = setting(1.0, ge=0)
    """inverse_sqrt: multiplies d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)."""
    lr: float = setting(5e-4, ge=0)
    """cosine: the peak learning rate reached after warmup."""
    min_lr: float = setting(0.0, ge=0)
    """cosine: the learning rate at the end (max_steps or max_minutes)."""
    adam_beta1: float = setting(0.9, ge=0, lt=1)
    """Adam beta1 (the paper: 0.9)."""
    adam_beta2: float = setting(0.98, ge=0, lt=1)
    """Adam beta2 (the paper: 0.98)."""
    adam_eps: float = setting(1e-9, ge=0)
    """Adam epsilon (the paper: 1e-9)."""
    weight_decay: float = setting(0.0, ge=0)
    """Decoupled weight decay (AdamW style; the paper: none)."""
    label_smoothing: float = setting(0.1, ge=0, lt=1)
    """Label smoothing epsilon (§5.4: 0.1); spread over the vocabulary minus padding."""
    late_dropout: float = setting(0.0, ge=0, lt=1)
    """Share of training (of max_minutes when set, else of max_steps; whichever is further along)
    run with every dropout of the model off before they start at their rates (Liu et al. 2023, "late
    dropout": training.dropout); 0 = dropout from the first step."""
    clip_norm: float = setting(0.0, ge=0)
    """Clip the gradient's global L2 norm to this (0 = no clipping; the paper does not clip)."""
    precision: str = setting("auto", choices=PRECISIONS)
    """auto (bf16 where measured faster: see transformer.runtime.precision); fp32; bf16 (autocast,
    CPU or GPU); fp16 (autocast + gradient scaling, GPU only). The run's config.toml records the
    resolved one."""
    device: str = setting("auto", choices=DEVICES)
    """auto (cuda when available), cpu or cuda."""
    valid_every: int = setting(1000, gt=0)
    """Validate every this many steps (a final validation always runs)."""
    bleu_samples: int = setting(200, ge=0)
    """Translation: greedy-decode this many validation pairs at each validation for BLEU (0 =
    off)."""
    valid_questions: int = setting(200, ge=0)
    """Question answering: validate (loss, exact match, F1) on the first this many questions of
    data.squad.valid; speech: the greedy WER of the first this many clips of data.audio.valid;
    caption: the greedy captions' exact match and chrF on this many images spread evenly over
    data.images.valid (0 = all)."""
    ctc_weight: float = setting(0.3, ge=0, le=1)
    """speech, with a CTC head on the encoder (model.audio.ctc): the loss is (1 - w) x the
    decoder's cross entropy + w x CTC's (Kim et al. 2017, joint CTC-attention)."""
    pad_to_max: bool | None = None
    """speech with init_from: overrides the model's model.audio.pad_to_max (null keeps it). false
    fine-tunes a Whisper model on each clip at its own length, the padding masked, instead of a
    whole 30 s window (a 3 s clip: 150 encoder positions, not 1,500); the model it writes then
    transcribes without padding."""
    save_every: int = setting(1000, gt=0)
    """Write a checkpoint every this many steps (and at the end)."""
    keep_last: int = setting(5, gt=0)
    """Checkpoints to keep (older ones are deleted; best/ and last/ are kept apart)."""
    log_every: int = setting(100, gt=0)
    """Plain log lines every this many steps when not on a terminal (metrics.jsonl gets every
    step)."""
    num_threads: int = setting(0, ge=0)
    """CPU threads for torch (0 = torch's default)."""
    activation_checkpointing: bool = False
    """Keep only each layer's input for the backward pass and compute the layer again there
    (activation checkpointing: Hugging Face's gradient_checkpointing): a forward pass more, for a
    fraction of the activation memory, which at long sequences or large batches is most of a
    fine-tuning run's memory (with LoRA, nearly all of it). Measured in
    docs/benchmarks/training.md."""
    compile: bool = False
    """Run the training forward and backward through torch.compile (TorchInductor fuses the
    elementwise work into fewer kernels). The first steps, and each new batch shape until torch
    marks the shapes dynamic, spend time compiling. Measured per device in
    docs/benchmarks/gpu.md."""

    def __post_init__(self) -> None:
        if isinstance(self.lora, dict):  # from TOML / JSON
            object.__setattr__(self, "lora", from_values(LoraConfig, self.lora, "train.lora"))
        if self.lora is not None and not isinstance(self.lora, LoraConfig):
            raise ConfigError(
                f"train.lora={self.lora!r} is not valid: give a [train.lora] table or a LoraConfig"
            )
        if self.init_parts is not None:
            object.__setattr__(self, "init_parts", init_parts(self.init_parts))
        check_types(self, "train")
        check_settings(self, "train")
        if self.schedule == "inverse_sqrt" and self.lr_factor <= 0:
            raise ConfigError(f"train.lr_factor={self.lr_factor!r} is not valid: it must be > 0")
        if self.schedule == "cosine" and self.lr <= 0:
            raise ConfigError(f"train.lr={self.lr!r} is not valid: it must be > 0")
