"""Sample recognition (evaluation/image_lm.py score_samples, `evaluate --classifier`): every label
gets its samples in batches with their own seeds, the decoding settings reach the sampler, the
classifier's verdicts are counted against the label each sample was drawn for; and the command
prints the share, each label's recall and the confusion matrix."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from transformer.evaluation.image_lm import score_samples

LABELS = ("top", "bottom")


def pattern(label: str, n: int) -> torch.Tensor:
    """n 4 x 4 images, bright in the half the label names."""
    images = torch.zeros(n, 1, 4, 4, dtype=torch.uint8)
    rows = slice(0, 2) if label == "top" else slice(2, 4)
    images[:, :, rows] = 255
    return images


class Generator:
    """Draws `label`'s pattern, except that every third batch of "bottom" comes out as "top"."""

    def __init__(self):
        self.pixels = SimpleNamespace(labels=LABELS)
        self.calls: list[tuple[int, str, int, dict]] = []

    def generate_images(self, n, label=None, seed=None, **decode):
        self.calls.append((n, label, seed, decode))
        drawn = "top" if label == "bottom" and len(self.calls) % 3 == 0 else label
        return pattern(drawn, n)


class Classifier:
    """Names an image by its bright half."""

    labels = ["bottom", "top"]  # another order than the generator's: matched by name

    def classify_images(self, images):
        top = images[:, :, :2].float().mean((1, 2, 3)) > images[:, :, 2:].float().mean((1, 2, 3))
        return [[("top" if t else "bottom", 1.0)] for t in top.tolist()]


def test_samples_are_drawn_per_label_in_batches_and_counted_against_their_label():
    generator, seen = Generator(), []
    share, truth, predicted = score_samples(
        generator,
        Classifier(),
        per_class=5,
        seed=2,
        batch_size=2,
        on_images=lambda images, i: seen.append((len(images), i)),
        guidance_scale=3.0,
        temperature=0.5,
    )
    sizes = [(n, label) for n, label, _, _ in generator.calls]
    assert sizes == [
        (2, "top"),
        (2, "top"),
        (1, "top"),
        (2, "bottom"),
        (2, "bottom"),
        (1, "bottom"),
    ]
    assert len({seed for _, _, seed, _ in generator.calls}) == 6  # each batch its own seed
    assert all(d == {"guidance_scale": 3.0, "temperature": 0.5} for *_, d in generator.calls)
    assert seen == [(2, 0), (2, 0), (1, 0), (2, 1), (2, 1), (1, 1)]
    assert truth == [0] * 5 + [1] * 5
    # the bottom batch drawn third of its label (call 6) came out as "top": 1 image misnamed
    assert predicted == [0] * 5 + [1] * 4 + [0]
    assert share == pytest.approx(9 / 10)


def test_the_same_seed_draws_the_same_batches():
    a, b = Generator(), Generator()
    score_samples(a, Classifier(), per_class=3, seed=7)
    score_samples(b, Classifier(), per_class=3, seed=7)
    assert [c[2] for c in a.calls] == [c[2] for c in b.calls]


def test_a_classifier_of_other_labels_or_a_generator_without_labels_is_refused():
    other = SimpleNamespace(labels=["cat", "dog"], classify_images=None)
    with pytest.raises(ValueError, match="the classifier's labels are not the generator's"):
        score_samples(Generator(), other, per_class=1)
    plain = Generator()
    plain.pixels = SimpleNamespace(labels=())
    with pytest.raises(ValueError, match="needs a class-conditional generator"):
        score_samples(plain, Classifier(), per_class=1)


def test_evaluate_with_a_classifier_prints_recognition_per_label(tmp_path, capsys):
    """The command end to end on real (untrained) models: a class-conditional generator over 4 x 4
    images and a ViT classifier of the same labels."""
    import transformer
    from tests.cli.common import run
    from transformer.config import ModelConfig
    from transformer.data.images import save_split
    from transformer.data.pixels import ImageTokens
    from transformer.model_dir import save_model

    torch.manual_seed(0)
    tokens = ImageTokens(4, 1, 4, labels=LABELS)
    lm = ModelConfig(arch="decoder", d_model=16, n_heads=2, n_decoder_layers=1, d_ff=32,
                     positional="learned", max_positions=17, vocab_size=tokens.vocab_size)  # fmt: skip
    save_model(transformer.build_model(lm), tmp_path / "gen", pixels=tokens)
    vit = ModelConfig(arch="encoder", vocab_size=1, pad_id=0, bos_id=0, eos_id=0, d_model=16,
                      n_heads=2, n_encoder_layers=1, d_ff=32, n_classes=2,
                      vision={"image_size": 4, "patch_size": 2, "channels": 1})  # fmt: skip
    save_model(transformer.build_model(vit), tmp_path / "vit", labels=list(LABELS))
    images = torch.cat([pattern("top", 3), pattern("bottom", 3)]).numpy()
    save_split(tmp_path / "test.safetensors", images, np.array([0, 0, 0, 1, 1, 1]), list(LABELS))
    argv = ["evaluate", tmp_path / "gen", "--images", tmp_path / "test.safetensors",
            "--classifier", tmp_path / "vit", "--samples", "3", "--seed", "1",
            "--guidance-scale", "2", "--plot", tmp_path / "m.png"]  # fmt: skip
    rc, out, err = run(argv, capsys)
    assert rc == 0, err
    assert "bits/dim" in out and "samples recognised" in out and "(6 samples, 3 a label" in out
    assert any(line.split() and line.split()[0] == "bottom" for line in out.splitlines())
    assert (tmp_path / "m.png").is_file()
