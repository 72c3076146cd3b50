"""chat: supervised fine-tuning of a chat model (train.init_from, with its chat template) on
conversations (data.text.train_chat: JSONL of {"messages": [...]}, data/chat.py): next-token
prediction over each rendered conversation with the loss on the assistant's tokens only; the system
and user turns and the template's markup are read, not learned (trl's SFTTrainer with
assistant_only_loss, torchtune's train_on_input = false).

One conversation is one row; conversations longer than data.max_len tokens are dropped and
counted. Rows are bucketed by length into batches of at most train.batch_tokens padded tokens
(data.batching.batch_indices: little padding, no packing across conversations, so no attention
mask is needed: right padding in a causal model is never attended to by a real token). The output
layer runs on the learned positions only (DecoderOnly(positions=...)): on SmolLM2-135M the output
layer is a fifth of the model's products. The units are the learned tokens; the padding id may be
a real token there (SmolLM2's end of turn), so no target is dropped as padding. Validation: loss,
NLL and perplexity per learned token of data.text.valid_chat; best/ by validation loss.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...config import ConfigError, RunConfig
from ...data.batching import batch_indices, padding_share, to_device
from ...data.chat import ChatDataError, read_conversations, tokenize_conversation
from ...model_dir import load_config, load_model, load_tokenizers
from ...model_records import load_chat_template, load_decode_config
from ..loss import label_smoothed_cross_entropy
from .base import Objective, StepSums, autocast, typical_shape, validation_sums


@dataclass
class ChatBatch:
    """Right-padded conversations: ids (B, L) (inputs: each row but its last token), learned
    (B, L) True where the next token is an assistant's, targets (N,) those next tokens in row
    order; units = N."""

    ids: torch.Tensor
    learned: torch.Tensor
    targets: torch.Tensor
    units: int
    tokens: int

    def to(self, device) -> ChatBatch:
        move = lambda t: to_device(t, device)
        return ChatBatch(
            move(self.ids), move(self.learned), move(self.targets), self.units, self.tokens
        )


class ChatSFT(Objective):
    """Supervised fine-tuning on conversations, the loss on the assistant's turns (module doc)."""

    name = "chat"

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        dist,
        say: Callable[[str], None],
        resume: bool = False,
    ):
        super().__init__(config)
        d, base = config.data, config.train.init_from
        self.chat = load_chat_template(base)
        if not self.chat:
            raise ConfigError(
                f"train.init_from={base} has no chat template (chat_template.json): objective "
                "chat renders conversations with it; fine-tune a chat model (transformer "
                "import-hf of an instruct model), or train on text with objective lm"
            )
        self.tokenizer = load_tokenizers(base)[1]
        self.pad = load_config(base).pad_id
        self.train_rows = self._read(d.text.train_chat, "train_chat", say)
        valid = d.text.valid_chat
        self.valid_rows = self._read(valid, "valid_chat", say) if valid else []
        self.sizes = np.fromiter((len(r[0]) for r in self.train_rows), np.int64)
        learned = sum(int(r[1].sum()) for r in self.train_rows)
        say(
            f"data: {len(self.train_rows):,} training and {len(self.valid_rows):,} validation "
            f"conversations; {int(self.sizes.sum()):,} tokens, {learned:,} of them the "
            f"assistant's ({learned / max(int(self.sizes.sum()), 1):.0%}: the loss is on those)"
        )

    def _read(self, path: str, key: str, say) -> list[tuple[np.ndarray, np.ndarray]]:
        """(ids, learned) of each conversation of the JSONL file data.<key> at most data.max_len
        tokens long."""
        limit = self.config.data.max_len
        what = "training" if key == "train_chat" else "validation"
        rows, dropped = [], 0
        try:
            conversations = read_conversations(path)
            for messages in conversations:
                ids, learned = tokenize_conversation(self.tokenizer, self.chat, messages)
                if len(ids) > limit:
                    dropped += 1
                    continue
                rows.append((np.asarray(ids, np.int64), np.asarray(learned, bool)))
        except ChatDataError as e:
            raise ConfigError(f"data.{key}: {e}") from None
        if dropped:
            say(
                f"dropped {dropped:,} {what} conversation(s) longer than data.max_len={limit} "
                "tokens: raise data.max_len to keep them"
            )
        if not rows:
            raise ConfigError(
                f"no {what} conversation of {path} is at most data.max_len={limit} tokens: raise "
                "data.max_len"
            )
        return rows

    # data
    def batches(self, epoch):
        t = self.config.train
        return batch_indices(self.sizes, t.batch_tokens, t.seed, epoch)

    def padding_share(self, batches):
        return padding_share(batches, self.sizes - 1)

    def attention_shape(self):
        return typical_shape(self.sizes, self.config.train.batch_tokens)

    def collate(self, indices, key=None, rows=None) -> ChatBatch:
        rows = [(self.train_rows if rows is None else rows)[i] for i in indices]
        width = max(len(ids) for ids, _ in rows) - 1
        ids = torch.full((len(rows), width), self.pad, dtype=torch.long)
        nexts = torch.full_like(ids, self.pad)
        learned = torch.zeros((len(rows), width), dtype=torch.bool)
        for r, (row, learn) in enumerate(rows):
            ids[r, : len(row) - 1] = torch.from_numpy(row[:-1])
            nexts[r, : len(row) - 1] = torch.from_numpy(row[1:])
            learned[r, : len(row) - 1] = torch.from_numpy(learn[1:])
        targets = nexts[learned]  # (N,)
        return ChatBatch(ids, learned, targets, len(targets), sum(len(row) - 1 for row, _ in rows))

    def units(self, indices, key):
        return int(sum(self.train_rows[i][1][1:].sum() for i in indices))

    @property
    def has_valid(self):
        return bool(self.valid_rows)

    # model
    def new_model(self):
        return load_model(self.config.train.init_from)

    def loss(self, net, model, batch: ChatBatch, device):
        with autocast(device, self.config.train.precision):
            logits = net(batch.ids, positions=batch.learned)  # (N, V)
        out = label_smoothed_cross_entropy(
            logits,
            batch.targets,
            self.config.train.label_smoothing,
            model.config.pad_id,
            batch.units,
            consume_logits=True,
            ignore_id=-1,  # every target is learned: the rows were picked
        )
        return StepSums(out.loss, out.nll, batch.units, batch.tokens)

    def valid_batches(self):
        sizes = [len(ids) for ids, _ in self.valid_rows]
        for indices in batch_indices(sizes, self.config.train.batch_tokens, 0, 0, shuffle=False):
            yield self.collate(indices, rows=self.valid_rows)

    def validate(self, model, device):
        return validation_sums(self, model, device, self.valid_batches())

    def save_files(self):
        base = self.config.train.init_from
        return {"tokenizer": self.tokenizer, "decode": load_decode_config(base), "chat": self.chat}
