"""Training throughput, ours vs Hugging Face Marian, side by side in one process.

    python benchmarks/train_speed.py --data data/bible --pairs 6000 --repeats 5

Both train a model of the Bible recipe's size (d_model 256, 3+3 layers, 4 heads, d_ff 1024,
joint 8k BPE) on the same Spanish->English pairs with the same optimiser, label smoothing
and clipping. Each side batches as its standard training loop does: ours by token count,
grouped by length (transformer.data.batching); the peer random batches of a fixed number of
sentences padded to the longest (Seq2SeqTrainer's default sampler + DataCollatorForSeq2Seq),
with as many sentences as our batches average. Throughput counts real (non-padding) target
tokens. The two alternate in rounds of --steps steps; the ratio is the median over rounds.
Precision fp32 and bf16 (autocast) are measured separately: the same for both sides.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from transformers import MarianConfig, MarianMTModel  # noqa: E402

import transformer  # noqa: E402
from transformer.config import ModelConfig  # noqa: E402
from transformer.data.batching import batch_indices, collate, encode_examples  # noqa: E402
from transformer.data.tokenizer import train_bpe  # noqa: E402
from transformer.training.loss import label_smoothed_cross_entropy  # noqa: E402

PAD, BOS, EOS = 0, 2, 3


def sample_arguments(parser: argparse.ArgumentParser, batch_tokens: int, steps: int, repeats: int) -> None:
    """The options of a training benchmark on a sample of the Bible corpus (also benchmarks/loss_speed.py)."""
    parser.add_argument("--data", default="data/bible", help="directory with train.spa / train.eng")
    parser.add_argument("--pairs", type=int, default=6000, help="training pairs to use (a prefix of the shuffled set)")
    parser.add_argument("--batch-tokens", type=int, default=batch_tokens)
    parser.add_argument("--steps", type=int, default=steps, help="steps per side per round")
    parser.add_argument("--repeats", type=int, default=repeats, help="rounds")


def bible_examples(data: Path, pairs: int, vocab_size: int = 8000):
    """A fixed random sample of `pairs` Spanish->English training pairs, a joint BPE trained on it, the encoded examples."""
    src = data.joinpath("train.spa").read_text(encoding="utf-8").splitlines()
    tgt = data.joinpath("train.eng").read_text(encoding="utf-8").splitlines()
    order = list(range(len(src)))
    random.Random(0).shuffle(order)
    src, tgt = [src[i] for i in order[:pairs]], [tgt[i] for i in order[:pairs]]
    tok = train_bpe(src + tgt, vocab_size=vocab_size)
    examples, _ = encode_examples(tgt, tok, 128, src, tok)
    return tok, examples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sample_arguments(parser, batch_tokens=4096, steps=8, repeats=5)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--precision", choices=["fp32", "bf16", "both"], default="both")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    tok, examples = bible_examples(Path(args.data), args.pairs)
    vocab = tok.vocab_size

    ours_batches = batch_indices([e.size for e in examples], args.batch_tokens, seed=1, epoch=0)
    per_batch = round(len(examples) / len(ours_batches))
    rng = random.Random(1)
    shuffled = list(range(len(examples)))
    rng.shuffle(shuffled)
    peer_batches = [shuffled[i : i + per_batch] for i in range(0, len(shuffled) - per_batch + 1, per_batch)]

    def real_tokens(batch):
        return sum(len(examples[i].tgt) + 1 for i in batch)

    def padded(batch):
        return len(batch) * (max(len(examples[i].tgt) for i in batch) + 1)

    share = lambda batches: 1 - sum(real_tokens(b) for b in batches) / sum(padded(b) for b in batches)
    print(f"{len(examples)} pairs, vocabulary {vocab}; ours {len(ours_batches)} batches (target padding "
          f"{share(ours_batches):.1%}), peer {len(peer_batches)} batches of {per_batch} sentences "
          f"(target padding {share(peer_batches):.1%}); torch {torch.__version__}, {torch.get_num_threads()} threads")

    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=vocab, d_model=256, n_heads=4, n_encoder_layers=3, n_decoder_layers=3, d_ff=1024,
                      dropout=0.1, max_positions=256)
    ours = transformer.build_model(cfg).train()
    peer = MarianMTModel(MarianConfig(
        vocab_size=vocab, d_model=256, encoder_layers=3, decoder_layers=3, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=1024, decoder_ffn_dim=1024, dropout=0.1, activation_function="relu",
        max_position_embeddings=256, scale_embedding=True, pad_token_id=PAD, eos_token_id=EOS,
        decoder_start_token_id=BOS, share_encoder_decoder_embeddings=True)).train()
    adam = dict(lr=5e-4, betas=(0.9, 0.98), eps=1e-9)
    opt_ours, opt_peer = torch.optim.Adam(ours.parameters(), **adam), torch.optim.Adam(peer.parameters(), **adam)

    def step_ours(batch, bf16):
        b = collate([examples[i] for i in batch], PAD, BOS, EOS)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = ours(b.src, b.tgt_in, src_mask=b.src_mask)
        sums = label_smoothed_cross_entropy(logits, b.tgt_out, 0.1, PAD)
        opt_ours.zero_grad(set_to_none=True)
        (sums.loss / sums.n_tokens).backward()
        torch.nn.utils.clip_grad_norm_(ours.parameters(), 1.0)
        opt_ours.step()
        return sums.n_tokens

    def step_peer(batch, bf16):
        rows = [examples[i] for i in batch]
        s_len, t_len = max(len(e.src) for e in rows), max(len(e.tgt) + 1 for e in rows)
        input_ids = torch.full((len(rows), s_len), PAD)
        labels = torch.full((len(rows), t_len), -100)
        for r, e in enumerate(rows):
            input_ids[r, : len(e.src)] = torch.tensor(e.src)
            labels[r, : len(e.tgt) + 1] = torch.tensor(e.tgt + [EOS])
        decoder_input_ids = peer.prepare_decoder_input_ids_from_labels(labels=labels)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = peer(input_ids=input_ids, attention_mask=input_ids != PAD, decoder_input_ids=decoder_input_ids).logits
        loss = torch.nn.functional.cross_entropy(logits.float().view(-1, vocab), labels.view(-1), ignore_index=-100,
                                                 label_smoothing=0.1)
        opt_peer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(peer.parameters(), 1.0)
        opt_peer.step()
        return int((labels != -100).sum())

    def timed(step, batches, start, bf16):
        tokens, t0 = 0, time.perf_counter()
        for k in range(args.steps):
            tokens += step(batches[(start + k) % len(batches)], bf16)
        return tokens / (time.perf_counter() - t0)

    precisions = ["fp32", "bf16"] if args.precision == "both" else [args.precision]
    for precision in precisions:
        bf16 = precision == "bf16"
        timed(step_ours, ours_batches, 0, bf16), timed(step_peer, peer_batches, 0, bf16)  # warm-up
        ratios, ours_tps, peer_tps = [], [], []
        for r in range(args.repeats):
            a = timed(step_ours, ours_batches, (r + 1) * args.steps, bf16)
            b = timed(step_peer, peer_batches, (r + 1) * args.steps, bf16)
            ours_tps.append(a)
            peer_tps.append(b)
            ratios.append(a / b)
            print(f"  {precision} round {r + 1}: ours {a:,.0f} tok/s, peer {b:,.0f} tok/s, ratio {a / b:.2f}", flush=True)
        print(f"{precision}: ours {statistics.median(ours_tps):,.0f} real target tok/s, peer "
              f"{statistics.median(peer_tps):,.0f}; median ratio {statistics.median(ratios):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
