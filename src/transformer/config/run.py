"""What a training run reads: [data] and [train] (train.py) beside [model] and [decode]
(RunConfig), the rules across those sections, and the resolved config written back as TOML;
reading a TOML file with `--set` overrides is toml.py's."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from .checks import ConfigError
from .data import DataConfig, flat_value
from .decode import DecodeConfig
from .model import ModelConfig
from .objectives import FRONT_ENDS, GATED, OBJECTIVES
from .sizing import SizingConfig
from .train import TrainConfig

PAIR_METRICS = ("bleu", "rouge")
"""What `evaluate --metric` scores outputs with: BLEU and chrF, or ROUGE-1/2/L (summaries)."""


SECTIONS = ("model", "data", "train", "decode", "sizing")


@dataclass(frozen=True)
class RunConfig:
    """Everything a training run reads: [model], [data], [train] and [decode] (validation and saved
    defaults).

    The model's vocab_size is not set here: it comes from the trained tokenizer.
    """

    model: ModelConfig
    data: DataConfig
    train: TrainConfig = TrainConfig()
    decode: DecodeConfig = DecodeConfig()
    sizing: SizingConfig = SizingConfig()

    def __post_init__(self) -> None:
        objective = self.objective
        keys = OBJECTIVES[objective].data
        given = [key for key in keys if flat_value(self.data, key) is not None]
        data_key = (given or keys)[0]
        self._check_families(objective)
        self._check_what_applies(objective)
        if flat_value(self.data, data_key) is None:
            raise ConfigError(
                f"train.objective={objective!r} trains on data.{data_key}"
                + ("/train_tgt" if data_key == "train_src" else "")
                + ": set it"
            )
        if self.train.init_from is None:
            arch = OBJECTIVES[objective].arch
            if self.model.arch != arch:
                raise ConfigError(
                    f"model.arch={self.model.arch!r} cannot be trained with objective "
                    f'{objective!r} (data.{data_key}): use arch = "{arch}"'
                )
            self._check_lengths(objective)

    def _check_families(self, objective: str) -> None:
        """A kind of data and the model's front end for it come together (FRONT_ENDS); an
        init_from model brings its own."""
        if self.train.init_from is not None:
            return
        for key, part, what in FRONT_ENDS:
            if key == "train_images" and objective == "image_lm":
                continue  # an image generator reads pixel tokens, not patches
            if (flat_value(self.data, key) is not None) != (getattr(self.model, part) is not None):
                raise ConfigError(
                    f"data.{key} needs {what} ([model.{part}]), and {what} needs data.{key}: set "
                    "both or neither"
                )
        if (objective == "contrastive") != (self.model.contrastive is not None):
            raise ConfigError(
                "objective contrastive trains a dual encoder ([model.contrastive]), and a dual "
                "encoder is trained with objective contrastive: set both or neither"
            )

    def _check_what_applies(self, objective: str) -> None:
        """Settings that only some objectives read (GATED, each objective's `reads`) are refused
        for the others."""
        for name, fix in GATED.items():
            section, key = name.split(".")
            table = getattr(self, section)
            value = flat_value(table, key) if section == "data" else getattr(table, key)
            objectives = [o for o, record in OBJECTIVES.items() if name in record.reads]
            if value and objective not in objectives:
                which = f"objective{'s' if len(objectives) > 1 else ''} " + " and ".join(objectives)
                raise ConfigError(f"{name} is for {which}, not {objective!r}: {fix}")
        d = self.data
        if d.images.random_crop and objective == "detection":
            raise ConfigError(
                "data.random_crop is for image classification: a detector's boxes would leave the "
                "image; remove it (data.horizontal_flip works)"
            )
        if isinstance(d.images.train, tuple) and objective != "contrastive":
            raise ConfigError(
                f"data.train_images lists {len(d.images.train)} image sets: only objective "
                "contrastive trains on several; give one"
            )
        if self.packed and d.bpe_dropout:
            raise ConfigError(
                "data.bpe_dropout is not available on packed text: set data.bpe_dropout = 0, or "
                "data.pack = false (one example per line)"
            )
        if self.train.pad_to_max is not None and (
            objective != "speech" or self.train.init_from is None
        ):
            raise ConfigError(
                "train.pad_to_max is for objective speech with train.init_from (it overrides the "
                "pretrained model's); a model trained from scratch sets model.audio.pad_to_max"
            )
        if self.train.init_from is None and (self.train.lora is not None or objective == "chat"):
            what = "train.lora adapts" if self.train.lora is not None else "objective chat tunes"
            raise ConfigError(
                f"{what} a pretrained model: set train.init_from to its model directory"
            )
        if self.train.freeze_encoder and self.train.init_from is None:
            raise ConfigError(
                "train.freeze_encoder is for a pretrained model (train.init_from): a classifier's "
                "encoder under a new head, or a speech model's audio encoder"
            )
        if self.train.freeze_encoder and self.train.lora is not None:
            raise ConfigError(
                "train.freeze_encoder and train.lora both choose what is trained: keep one "
                "(with train.lora every pretrained weight is frozen already)"
            )

    def _check_lengths(self, objective: str) -> None:
        """What the model's position table must hold: the longest example, the answer window, a
        packed block."""
        m, table = self.model, self.model.positional in ("sinusoidal", "learned")
        reads_tokens = (m.vision is None or objective == "caption") and m.detection is None
        if (
            table
            and not self.packed
            and self.data.max_len > m.max_positions
            and reads_tokens
            and objective != "image_lm"
        ):
            raise ConfigError(
                f"data.max_len={self.data.max_len} exceeds model.max_positions={m.max_positions}: "
                "lower data.max_len or raise model.max_positions"
            )
        if table and objective == "qa" and self.decode.answer_window > m.max_positions:
            raise ConfigError(
                f"decode.answer_window={self.decode.answer_window} exceeds "
                f"model.max_positions={m.max_positions}: lower decode.answer_window or raise "
                "model.max_positions"
            )
        if self.packed and (self.data.text.block_size or 0) > m.max_positions:
            raise ConfigError(
                f"data.block_size={self.data.text.block_size} exceeds "
                f"model.max_positions={m.max_positions}: lower data.block_size or raise "
                "model.max_positions"
            )

    @property
    def packed(self) -> bool:
        """A language model on packed text (data.text.pack, unset = packed for objective lm)."""
        return self.objective == "lm" and self.data.text.pack is not False

    @property
    def objective(self) -> str:
        """train.objective, or when unset: seq2seq for aligned files, classify for a TSV or images
        (image_lm for images and arch = "decoder", caption for images and arch =
        "encoder-decoder"), and for train_text lm (arch = "decoder") or
        mlm (arch = "encoder")."""
        if self.train.objective is not None:
            return self.train.objective
        if self.data.is_translation:
            return "seq2seq"
        if self.data.images.train is not None and self.model.arch == "decoder":
            return "image_lm"
        if self.data.images.train is not None and self.model.contrastive is not None:
            return "contrastive"
        if self.data.images.train is not None and self.model.arch == "encoder-decoder":
            return "caption"
        if self.data.text.train_tsv is not None or self.data.images.train is not None:
            return "classify"
        if self.data.squad.train is not None:
            return "qa"
        if self.data.text.train_chat is not None:
            return "chat"
        if self.data.audio.train is not None:
            return "speech"
        if self.data.detection.train is not None:
            return "detection"
        return "mlm" if self.model.arch == "encoder" else "lm"

    def to_dict(self) -> dict[str, dict[str, Any]]:
        model = self.model.to_dict()
        for key in ("vocab_size", "tgt_vocab_size"):  # set by the tokenizer
            model.pop(key)
        return {
            "model": model,
            "data": self.data.to_dict(),
            "train": dataclasses.asdict(self.train),
            "decode": self.decode.to_dict(),
            **({"sizing": dataclasses.asdict(self.sizing)} if self.sizing.names else {}),
        }

    def to_toml(self) -> str:
        """The resolved config as TOML (None values are written as comments: they mean the
        default)."""
        lines = []
        for section, values in self.to_dict().items():
            tables = {k: v for k, v in values.items() if isinstance(v, dict)}
            for name, table in [
                (section, values),
                *((f"{section}.{k}", v) for k, v in tables.items()),
            ]:
                lines.append(f"[{name}]")
                for key, value in table.items():
                    if isinstance(value, dict) and table is values:
                        continue  # a nested table: its own [section.key] below
                    lines.append(
                        f"# {key} is unset" if value is None else f"{key} = {_toml_value(value)}"
                    )
                lines.append("")
        return "\n".join(lines)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):  # a nested config, as an inline table
        return (
            "{"
            + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items() if v is not None)
            + "}"
        )
    raise TypeError(f"cannot write {value!r} to TOML")
