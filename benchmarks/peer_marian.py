"""Peer baseline: Hugging Face MarianMTModel trained on the same data, with the same BPE, for the same time.

    python benchmarks/peer_marian.py --run runs/demo --minutes 15 --out runs/peer-marian

Reads our run directory (its resolved config.toml and the tokenizer in best/), builds a
randomly initialised MarianMTModel of the same size (Marian's own architecture: post-norm,
sinusoidal positions), trains it with transformers' standard Seq2SeqTrainer — the same
optimiser settings, schedule, label smoothing, clipping and precision as our config, and
sentence batches of the size ours average — and scores the test split with beam search
exactly as `transformer demo` does (sacreBLEU on detokenised text). Training throughput
counts real (non-padding) target tokens per second of training, as our metrics.jsonl does.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import tomllib

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from transformers import (  # noqa: E402
    DataCollatorForSeq2Seq,
    MarianConfig,
    MarianMTModel,
    PreTrainedTokenizerFast,
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
    TrainerCallback,
)

from transformer.evaluation.metrics import bleu, chrf  # noqa: E402


def read_lines(path: str) -> list[str]:
    return Path(path).read_text(encoding="utf-8").splitlines()


class Budget(TrainerCallback):
    """Stop after a wall-clock budget; count real target tokens and time per step."""

    def __init__(self, minutes: float):
        self.seconds = minutes * 60
        self.start = None
        self.tokens = 0
        self.train_seconds = 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        if time.monotonic() - self.start >= self.seconds:
            control.should_training_stop = True
        return control

    def on_train_end(self, args, state, control, **kwargs):
        self.train_seconds = time.monotonic() - self.start


class CountingCollator(DataCollatorForSeq2Seq):
    budget: Budget | None = None

    def __call__(self, features, return_tensors=None):
        batch = super().__call__(features, return_tensors)
        if self.budget is not None:
            self.budget.tokens += int((batch["labels"] != -100).sum())
        return batch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="our run directory (config.toml, best/tokenizer.json)")
    parser.add_argument("--minutes", type=float, default=15.0)
    parser.add_argument("--out", default="runs/peer-marian")
    parser.add_argument("--test-lines", type=int, default=None, help="score only the first N test lines")
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    run = Path(args.run)
    config = tomllib.loads((run / "config.toml").read_text(encoding="utf-8"))
    m, d, t, dec = config["model"], config["data"], config["train"], config.get("decode", {})
    tok_file = run / "best" / "tokenizer.json"
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(tok_file), pad_token="<pad>", unk_token="<unk>",
                                        bos_token="<s>", eos_token="</s>")
    pad, bos, eos = 0, 2, 3
    src_train, tgt_train = read_lines(d["train_src"]), read_lines(d["train_tgt"])
    max_len = d.get("max_len", 256)
    enc_src = tokenizer(src_train, add_special_tokens=False)["input_ids"]
    enc_tgt = tokenizer(tgt_train, add_special_tokens=False)["input_ids"]
    examples = [{"input_ids": s, "labels": y + [eos]} for s, y in zip(enc_src, enc_tgt, strict=True)
                if s and y and len(s) <= max_len and len(y) + 1 <= max_len]

    # Sentences per batch: what our token-count batches average on this data.
    ours = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    ours_train = [r for r in ours if r.get("split") == "train"]
    mean_target = sum(len(e["labels"]) for e in examples) / len(examples)
    per_batch = max(1, round(sum(r["tokens"] for r in ours_train) / len(ours_train) / mean_target))

    marian = MarianConfig(
        vocab_size=tokenizer.vocab_size if len(tokenizer) == tokenizer.vocab_size else len(tokenizer),
        d_model=m["d_model"], encoder_layers=m["n_encoder_layers"], decoder_layers=m["n_decoder_layers"],
        encoder_attention_heads=m["n_heads"], decoder_attention_heads=m["n_heads"],
        encoder_ffn_dim=m["d_ff"], decoder_ffn_dim=m["d_ff"], dropout=m.get("dropout", 0.1),
        attention_dropout=m.get("attention_dropout", 0.0), activation_dropout=m.get("activation_dropout", 0.0),
        activation_function=m.get("activation", "relu"), max_position_embeddings=m.get("max_positions", 1024),
        scale_embedding=True, pad_token_id=pad, eos_token_id=eos, bos_token_id=bos, decoder_start_token_id=bos,
        forced_eos_token_id=None, share_encoder_decoder_embeddings=True,
    )
    torch.manual_seed(t.get("seed", 1))
    model = MarianMTModel(marian)
    peak_lr = t.get("lr_factor", 1.0) * m["d_model"] ** -0.5 * t.get("warmup_steps", 4000) ** -0.5
    budget = Budget(args.minutes)
    collator = CountingCollator(tokenizer, model=model, label_pad_token_id=-100, padding=True)
    collator.budget = budget
    training = Seq2SeqTrainingArguments(
        output_dir=args.out, per_device_train_batch_size=per_batch, learning_rate=peak_lr,
        lr_scheduler_type="inverse_sqrt", warmup_steps=t.get("warmup_steps", 4000), adam_beta1=0.9, adam_beta2=0.98,
        adam_epsilon=1e-9, weight_decay=0.0, label_smoothing_factor=t.get("label_smoothing", 0.1),
        max_grad_norm=t.get("clip_norm", 0.0) or 1e9, max_steps=t.get("max_steps", 100000),
        bf16=t.get("precision", "fp32") == "bf16", use_cpu=not torch.cuda.is_available(), logging_steps=50,
        save_strategy="no", report_to=[], dataloader_num_workers=0, seed=t.get("seed", 1), disable_tqdm=True,
    )
    trainer = Seq2SeqTrainer(model=model, args=training, train_dataset=examples, data_collator=collator,
                             callbacks=[budget])
    trainer.train()
    steps = trainer.state.global_step
    tokens_per_s = budget.tokens / budget.train_seconds

    model.eval()
    src_test = read_lines(d["train_src"].replace("train.", "test."))[: args.test_lines]
    ref_test = read_lines(d["train_tgt"].replace("train.", "test."))[: args.test_lines]
    a, b = dec.get("max_len_a", 1.0), dec.get("max_len_b", 50)
    hyps = []
    order = sorted(range(len(src_test)), key=lambda i: len(src_test[i]))
    outputs = {}
    with torch.inference_mode():
        for lo in range(0, len(order), 32):
            idx = order[lo : lo + 32]
            batch = tokenizer([src_test[i] for i in idx], add_special_tokens=False, padding=True, return_tensors="pt")
            longest = int(batch["attention_mask"].sum(1).max())
            gen = model.generate(**batch, num_beams=dec.get("beam_size", 4), max_new_tokens=math.floor(a * longest + b),
                                 early_stopping=True, length_penalty=1.0)
            for i, row in zip(idx, gen, strict=True):
                outputs[i] = tokenizer.decode(row, skip_special_tokens=True).strip()
    hyps = [outputs[i] for i in range(len(src_test))]
    scores = {"bleu": bleu(hyps, ref_test), "chrf": chrf(hyps, ref_test)}
    ours_tps = sum(r["tokens"] for r in ours_train) / sum(
        ours_train[i]["tokens"] / ours_train[i]["tokens_per_s"] for i in range(len(ours_train)))
    result = {
        "peer": "MarianMTModel + Seq2SeqTrainer", "steps": steps, "sentences_per_batch": per_batch,
        "train_seconds": round(budget.train_seconds, 1), "target_tokens_per_s": round(tokens_per_s, 1),
        "ours_target_tokens_per_s": round(ours_tps, 1), "speedup": round(ours_tps / tokens_per_s, 2),
        "bleu": round(scores["bleu"].score, 2), "bleu_signature": scores["bleu"].signature,
        "chrf": round(scores["chrf"].score, 2), "test_lines": len(src_test),
    }
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
