"""What a run learns: each objective's data, batches, model, loss and validation, behind one
interface (base.Objective) that the loop (trainer.py) drives. One module per family:

- seq2seq.py: seq2seq (translation, text-to-text), lm on one example per line (data.pack = false)
  and span_corruption (T5): teacher forcing over target tokens; best/ by validation loss.
- lm.py: lm on packed text (the default): blocks of one token stream, GPT-style; best/ by loss.
- encoder.py: mlm (BERT's masked-LM) and what the encoder family shares; best/ by loss.
- classify.py: classify, a label per text or per image; best/ by validation accuracy.
- qa.py: qa, extractive question answering (a span head, SQuAD's data); best/ by validation F1.
- speech.py: speech, speech recognition (model.audio, Whisper's shape); best/ by validation WER.
- detection.py: detection, object detection as set prediction (model.detection, DETR); best/ by
  validation mAP.
- image_lm.py: image_lm, images generated pixel by pixel by a decoder (Image GPT); best/ by loss.
- contrastive.py: contrastive, a text-image dual encoder on images and their names (CLIP); best/
  by validation zero-shot accuracy.
- caption.py: caption, image captioning (model.vision under a text decoder), each image's name its
  caption; best/ by validation exact match.

`prepare_objective` picks one with a `match` on train.objective: no registry.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ...config import OBJECTIVE_ARCHS, ConfigError, RunConfig
from ...model_dir import load_config
from .. import distributed as D
from ..corpora import prepare_data
from .base import Objective, StepSums
from .caption import Caption
from .classify import Classify, ImageClassify
from .contrastive import Contrastive
from .detection import Detection
from .encoder import MaskedLM, encoder_model, init_dir
from .image_lm import ImageLM
from .lm import PackedLM
from .qa import SpanQA
from .seq2seq import Seq2Seq, SpanCorruption
from .speech import Speech

__all__ = [
    "Caption",
    "Classify",
    "Contrastive",
    "Detection",
    "ImageClassify",
    "ImageLM",
    "MaskedLM",
    "Objective",
    "PackedLM",
    "Seq2Seq",
    "SpanCorruption",
    "SpanQA",
    "Speech",
    "StepSums",
    "encoder_model",
    "prepare_objective",
]


def prepare_objective(
    config: RunConfig,
    run_dir: Path,
    dist: D.DistInfo,
    say: Callable[[str], None],
    resume: bool = False,
) -> Objective:
    """The run's objective with its data prepared (tokenizers trained or loaded, corpora built)."""
    if config.train.init_from and not resume:
        _check_init_from(config)
    match config.objective:
        case "classify" if config.data.train_images:
            return ImageClassify(config, run_dir, say, resume)
        case "classify":
            return Classify(config, run_dir, dist, say, resume)
        case "qa":
            return SpanQA(config, run_dir, dist, say, resume)
        case "speech":
            return Speech(config, run_dir, dist, say, resume)
        case "detection":
            return Detection(config, run_dir, say, resume)
        case "contrastive":
            return Contrastive(config, run_dir, dist, say, resume)
        case "caption":
            return Caption(config, run_dir, dist, say, resume)
        case "image_lm":
            return ImageLM(config, run_dir, say)
        case "span_corruption":
            return SpanCorruption(config, prepare_data(config, run_dir, dist, say, resume))
        case "mlm":
            data = prepare_data(config, run_dir, dist, say, resume)
            return MaskedLM(config, data, init_dir(config, run_dir, resume))
        case "lm" if config.packed:
            return PackedLM(config, run_dir, dist, say, resume)
        case "seq2seq" | "lm":
            return Seq2Seq(config, prepare_data(config, run_dir, dist, say, resume))
        case other:
            raise ConfigError(f"train.objective={other!r} is not an objective this trainer knows")


def _check_init_from(config: RunConfig) -> None:
    """init_from must be a model of the family the objective trains."""
    cfg = load_config(config.train.init_from)
    needs = OBJECTIVE_ARCHS[config.objective]
    if cfg.arch != needs:
        raise ConfigError(
            f"train.init_from={config.train.init_from} is an arch={cfg.arch!r} model: "
            f"objective {config.objective!r} needs arch={needs!r}"
        )
