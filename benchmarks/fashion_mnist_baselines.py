"""Baselines for Fashion-MNIST (`transformer data fashion-mnist`): what the ViT must beat, on this machine.

On DIR/test.safetensors (the official 10,000 test images), accuracy and macro-F1 (sklearn.metrics)
of models trained on DIR/train.safetensors (55,000 images; valid.safetensors holds the other 5,000):

1. logistic regression (scikit-learn): pixels / 255 as 784 features, LogisticRegression
   (lbfgs, multinomial, C = 1.0, up to 1,000 iterations; the dataset's baselines.json lists the
   grid its own benchmark searched, C = 1, 10, 100, without scores); seconds = fit + predict.
2. a small CNN in plain PyTorch (benchmark-only code), the shape of the dataset README's
   "2 Conv + pooling" baseline (91.6%): conv 5x5 32 -> ReLU -> max-pool 2 -> conv 5x5 64 -> ReLU
   -> max-pool 2 -> linear 1024 -> ReLU -> dropout 0.5 -> linear 10. Trained exactly as the ViT
   recipe trains (configs/fashion-mnist-vit.toml): the same pixels in [-1, 1], the same
   augmentation (random crop with 2 pixels of padding, horizontal flips; transformer.data.image_tensors.augment),
   AdamW (weight decay 0.05 on every parameter, as our trainer does), 300 warmup steps to 2e-3 then
   cosine, label smoothing 0.1, gradient norm clipped to 1, 128 images a batch, for --minutes of wall clock: the first 30 steps measure the
   speed, and the cosine schedule is set to end when the budget does. bf16 autocast where a training
   step of this CNN is measured 1.1x faster in it than in fp32 (on this machine), else fp32.
   The model with the best validation accuracy (checked 8 times) is the one scored on test.

    pip install -e '.[bench]'
    python -m transformer data fashion-mnist --out data/fashion-mnist
    python benchmarks/fashion_mnist_baselines.py [--data data/fashion-mnist] [--minutes 15] [--only cnn|logreg] [--json FILE]

Run it alone on the machine: the CNN's budget is wall clock.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from transformer.data.image_tensors import augment, to_pixels
from transformer.data.images import load_images
from transformer.runtime.measure_cache import cpu_name


def scores(gold, predicted) -> dict:
    from sklearn.metrics import accuracy_score, f1_score

    return {"accuracy": float(accuracy_score(gold, predicted)),
            "macro_f1": float(f1_score(gold, predicted, average="macro"))}


def logistic_regression(train, test) -> dict:
    from sklearn.linear_model import LogisticRegression

    x = train.images.reshape(len(train.images), -1).float().numpy() / 255.0
    start = time.perf_counter()
    model = LogisticRegression(C=1.0, max_iter=1000)
    model.fit(x, train.labels.numpy())
    predicted = model.predict(test.images.reshape(len(test.images), -1).float().numpy() / 255.0)
    return {"name": "logistic regression (scikit-learn, pixels, C=1)", **scores(test.labels.numpy(), predicted),
            "seconds": time.perf_counter() - start}


class SmallCNN(nn.Module):
    """The dataset README's 2 Conv + pooling baseline, in plain PyTorch."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(64 * 7 * 7, 1024)
        self.fc2 = nn.Linear(1024, classes)
        self.dropout = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 1, 28, 28) -> (B, classes)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # (B, 32, 14, 14)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # (B, 64, 7, 7)
        return self.fc2(self.dropout(F.relu(self.fc1(x.flatten(1)))))


def predict(model: nn.Module, images: torch.Tensor, bf16: bool, batch: int = 1000) -> torch.Tensor:
    model.eval()
    out = []
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        for start in range(0, len(images), batch):
            out.append(model(to_pixels(images[start:start + batch])).argmax(-1))
    model.train()
    return torch.cat(out)


def cnn(train, valid, test, minutes: float, seed: int = 0, batch: int = 128, lr: float = 2e-3,
        warmup: int = 300, checks: int = 8) -> dict:
    torch.manual_seed(seed)
    model = SmallCNN()
    bf16 = _bf16_faster(model, train.images[:batch])
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    budget = minutes * 60
    start = time.monotonic()
    step, total, epoch = 0, None, 0
    best, best_state, history = -1.0, None, []
    while True:
        g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
        order = torch.randperm(len(train.labels), generator=g)
        for k in range(len(order) // batch):
            indices = order[k * batch:(k + 1) * batch]
            images = augment(train.images[indices], 2, True, torch.Generator().manual_seed(step))
            if total is None and step == 30:  # the budget in steps, from the speed so far
                total = int(budget / ((time.monotonic() - start) / 30) * 0.97)
                check_every = max(1, total // checks)
            horizon = total or 10 ** 9
            rate = lr * min(1.0, (step + 1) / warmup) if step < warmup else \
                1e-5 + 0.5 * (lr - 1e-5) * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, horizon - warmup))))
            for group in optimizer.param_groups:
                group["lr"] = rate
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                logits = model(to_pixels(images))
            loss = F.cross_entropy(logits.float(), train.labels[indices], label_smoothing=0.1)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if total is not None and (step % check_every == 0 or step >= total):
                accuracy = float((predict(model, valid.images, bf16) == valid.labels).float().mean())
                history.append((step, round(accuracy, 4)))
                if accuracy > best:
                    best, best_state = accuracy, {k: v.clone() for k, v in model.state_dict().items()}
            if total is not None and step >= total:
                break
        else:
            epoch += 1
            continue
        break
    seconds = time.monotonic() - start
    model.load_state_dict(best_state)
    predicted = predict(model, test.images, bf16)
    params = sum(p.numel() for p in model.parameters())
    return {"name": f"small CNN (2 conv + pooling, {params / 1e6:.2f}M parameters, plain PyTorch)",
            **scores(test.labels.numpy(), predicted.numpy()), "seconds": seconds, "steps": step,
            "epochs": step * batch / len(train.labels), "images_per_s": step * batch / seconds,
            "precision": "bf16" if bf16 else "fp32", "valid_accuracy": history}


def _bf16_faster(model: nn.Module, images: torch.Tensor, repeats: int = 5) -> bool:
    """Whether a training step of this model is faster under bf16 autocast here (1.1x at least)."""
    x = to_pixels(images)
    state = {k: v.clone() for k, v in model.state_dict().items()}

    def run(bf16: bool) -> float:
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            model(x).float().sum().backward()
        model.zero_grad(set_to_none=True)
        return time.perf_counter() - start

    run(False), run(True)  # warm-up
    fp32 = min(run(False) for _ in range(repeats))
    bf16 = min(run(True) for _ in range(repeats))
    model.load_state_dict(state)
    return fp32 / bf16 >= 1.1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data/fashion-mnist")
    parser.add_argument("--minutes", type=float, default=15.0, help="the CNN's wall-clock budget")
    parser.add_argument("--only", choices=("cnn", "logreg"))
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    data = Path(args.data)
    train, valid, test = (load_images(data / f"{split}.safetensors", 1, 28) for split in ("train", "valid", "test"))
    print(f"CPU: {cpu_name()}, {torch.get_num_threads()} threads")
    results = []
    if args.only in (None, "logreg"):
        results.append(logistic_regression(train, test))
        print(json.dumps(results[-1]))
    if args.only in (None, "cnn"):
        results.append(cnn(train, valid, test, args.minutes))
        print(json.dumps(results[-1]))
    print("| model | test accuracy | test macro-F1 | seconds |\n|---|---:|---:|---:|")
    for r in results:
        print(f"| {r['name']} | {r['accuracy']:.2%} | {r['macro_f1']:.3f} | {r['seconds']:.0f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": cpu_name(), "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
