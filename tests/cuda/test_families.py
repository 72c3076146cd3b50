"""The newer model families on the device against the CPU: Image GPT (a decoder over pixel
tokens), the captioner (a ViT encoder under a text decoder), CLIP (the dual encoder), DETR (the
detector and its Hungarian set loss) and the speech model (the log-mel front end and its
encoder-decoder).

For each family, in fp32: a tiny random model copied to the device gives the CPU's outputs, its
family's loss and gradients (padding and masks included); decoding where it is deterministic gives
the CPU's output token for token (greedy image sampling, captions and transcripts, detections);
and the real trainer (training/trainer.py) with train.device set to the device's type runs a few
steps on each family's tiny data (as tests/training builds it), with finite losses, and a run
stopped after step 3 and resumed from step 2 repeats the uninterrupted one. The text
encoder-decoder and language model are tests/cuda's other files'.

Legend (model/__init__.py): B batch, T target length, V vocabulary, P patches, F audio frames,
Q object queries.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import transformer as T
from tests.cuda.common import assert_rel_close
from tests.decoding.test_images import TOKENS
from tests.decoding.test_images import model as suppression_test_model
from tests.model.test_audio_front_end import speech_config
from tests.model.test_caption import pixels as caption_pixels
from tests.model.test_caption import tiny as captioner
from tests.model.test_contrastive import inputs as clip_inputs
from tests.model.test_contrastive import model as dual_encoder
from tests.model.test_detection_model import detector_config
from tests.training import test_caption as caption_run
from tests.training import test_contrastive as clip_run
from tests.training import test_detection_training as detection_run
from tests.training import test_image_lm as image_lm_run
from tests.training import test_speech as speech_run
from tests.training.conftest import Runs
from transformer.config import AudioConfig, build_run_config
from transformer.data.audio import log_mel
from transformer.data.image_tensors import to_pixels
from transformer.data.pixels import START, sequences
from transformer.decoding.detect import all_predictions, read_images
from transformer.decoding.images import image_log_likelihoods, sample_images
from transformer.decoding.pipeline import Pipeline
from transformer.decoding.search.step import Stepper, blocked_tokens, inference
from transformer.decoding.transcribe import features_batch
from transformer.model_dir import save_model
from transformer.training.checkpoint import step_dirs
from transformer.training.loss import label_smoothed_cross_entropy
from transformer.training.objectives.contrastive import contrastive_loss
from transformer.training.objectives.detection.dense_loss import dense_loss
from transformer.training.objectives.detection.set_loss import detr_loss, hungarian_match
from transformer.training.trainer import train

pytestmark = pytest.mark.cuda

PAD, EOS = 0, 3
MIN_MARGIN = 1e-3
"""The least gap between the best and second-best log-probability at any step of the CPU's greedy
output, and for detections between a query's two likeliest classes, two scores, or a score and the
threshold: fp32 rounding on another device moves them by ~1e-6."""


def seeded() -> torch.Generator:
    """A fresh CPU generator, seeded: each input below is drawn from its own."""
    return torch.Generator().manual_seed(0)


@pytest.fixture(autouse=True)
def _one_cpu_thread():
    """The CPU's side runs tiny models, which one thread runs fastest (more only wait on each other,
    several times slower on a busy machine); the setting is restored."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def assert_gradients_close(ours: torch.nn.Module, ref: torch.nn.Module, what: str) -> None:
    """Each parameter's gradient within 1e-4 of its largest (other summation orders). One that is
    zero but for rounding on the CPU (a key bias, which softmax ignores; a value projection of a
    state that starts at zero) is only held to be small on the device too."""
    largest = max(q.grad.abs().max().item() for q in ref.parameters() if q.grad is not None)
    for (name, p), q in zip(ours.named_parameters(), ref.parameters(), strict=True):
        if q.grad is None:
            assert p.grad is None, f"{what}: {name} has a gradient on the device only"
            continue
        assert p.grad.device == p.device, name
        if q.grad.abs().max().item() <= 1e-6 * largest:
            assert p.grad.abs().max().item() <= 1e-5 * largest, f"{what}: gradient of {name}"
            continue
        assert_rel_close(p.grad, q.grad, 1e-4, f"{what}: gradient of {name}")


def greedy_margins(model, source, ids: torch.Tensor, steps: int, **options) -> torch.Tensor:
    """The gap between the best and second-best choice at each step that made the greedy output
    `ids` (B, <= steps) (its </s> included), over the KV cache (Stepper) as greedy decodes;
    options are Stepper's (src_mask, prefix, suppress, begin_suppress)."""
    ids = F.pad(ids, (0, steps - ids.shape[1]), value=PAD)  # (B, steps)
    gaps = []
    with inference(model):
        stepper = Stepper(model, source, **options)
        log_probs = stepper.start()  # (B, V)
        for t in range(steps):
            top2 = blocked_tokens(log_probs, model.config, t, 0).topk(2, dim=-1).values
            gaps.append(top2[:, 0] - top2[:, 1])
            if t + 1 < steps:
                log_probs = stepper.step(ids[:, t])
    lengths = (ids != PAD).sum(dim=1)  # (B,)
    return torch.stack(gaps, 1)[torch.arange(steps)[None] <= lengths[:, None]]


def image_gpt(seed: int = 0, **changes) -> torch.nn.Module:
    """tests/decoding's tiny Image GPT over TOKENS (3 x 3 grey, 4 levels, labels and names), as
    initialised: without the edit of its output layer that its suppression test makes (label rows
    + 3, tied to the input embeddings: a common mode that LayerNorm subtracts, leaving ~1e-5 of
    rounding where devices differ)."""
    config = suppression_test_model().config.replace(**changes)
    torch.manual_seed(seed)
    return T.build_model(config).eval()


# ---- (a) forward, loss and gradients ----
# Each case: a tiny random model on the CPU, and run(model, device) -> named outputs, the family's
# loss (per unit, as its objective divides) among them, backward done.


def image_gpt_case():
    model = image_gpt(seed=0)
    images = torch.randint(0, 256, (4, 1, 3, 3), dtype=torch.uint8, generator=seeded())
    prefixes = [
        TOKENS.prefix(label="a"),
        TOKENS.prefix(name="yxy"),
        [START],
        TOKENS.prefix(name="x"),
    ]
    inputs, targets = sequences(TOKENS, images, prefixes)  # (B, L - 1), right-padded

    def run(m, device):
        logits = m(inputs.to(device))  # (B, L - 1, V)
        out = label_smoothed_cross_entropy(logits, targets.to(device), 0.1, PAD)
        loss = out.loss / out.n_tokens
        loss.backward()
        return {"logits": logits, "loss": loss}

    return model, run


def caption_case():
    model = captioner(seed=0)
    images = caption_pixels(3)
    tgt_in = torch.tensor([[2, 5, 6, 7], [2, 8, PAD, PAD], [2, 9, 10, PAD]])  # <s> y, right-padded
    tgt_out = torch.tensor([[5, 6, 7, EOS], [8, EOS, PAD, PAD], [9, 10, EOS, PAD]])

    def run(m, device):
        memory, _ = m.encode(images.to(device))  # (B, 1 + P, C)
        logits = m(images.to(device), tgt_in.to(device))  # (B, T, V)
        out = label_smoothed_cross_entropy(logits, tgt_out.to(device), 0.1, PAD)
        loss = out.loss / out.n_tokens
        loss.backward()
        return {"memory": memory, "logits": logits, "loss": loss}

    return model, run


def clip_case():
    model = dual_encoder()
    pixels, ids, mask = clip_inputs(4)  # text 0 padded after 4 tokens
    names = torch.tensor([0, 1, 0, 2])  # images 0 and 2 share a name

    def run(m, device):
        p, i, k = pixels.to(device), ids.to(device), mask.to(device)
        logits = m(p, i, k)  # (B, B)
        image_to_text, text_to_image = contrastive_loss(logits, names.to(device))
        loss = (image_to_text + text_to_image) / 2 / len(names)
        loss.backward()
        return {"images": m.embed_images(p), "texts": m.embed_texts(i, k), "logits": logits,
                "loss": loss}  # fmt: skip

    return model, run


def detr_case():
    torch.manual_seed(0)
    model = T.build_model(detector_config(dense_aux=True))
    pixels = torch.rand(3, 1, 32, 32, generator=seeded()) * 2 - 1
    targets = [  # an image with two objects, one with none, one with one
        (torch.tensor([0, 2]), torch.tensor([[0.3, 0.3, 0.2, 0.2], [0.7, 0.6, 0.4, 0.1]])),
        (torch.zeros(0, dtype=torch.long), torch.zeros(0, 4)),
        (torch.tensor([1]), torch.tensor([[0.5, 0.5, 0.5, 0.3]])),
    ]

    def run(m, device):
        on = [(y.to(device), b.to(device)) for y, b in targets]  # as DetectionBatch.to moves them
        logits, boxes, (heat, cells) = m(pixels.to(device), all_layers=True, dense=True)
        layers = list(zip(logits.unbind(0), boxes.unbind(0), strict=True))
        matches = [hungarian_match(c, b, on) for c, b in layers]  # on the CPU, from either device
        sums = detr_loss(layers, on)
        dense, _ = dense_loss(heat, cells, on)
        loss = (sums.loss + dense) / sums.n_boxes
        loss.backward()
        matched = torch.cat([torch.cat([q, t]) for layer in matches for q, t in layer])
        return {"class logits": logits, "boxes": boxes, "heatmap": heat, "cell boxes": cells,
                "matches": matched, "loss": loss}  # fmt: skip

    return model, run


def speech_case():
    torch.manual_seed(0)
    model = T.build_model(speech_config(audio=AudioConfig(n_mels=8, max_frames=120, ctc=True)))
    lengths = torch.tensor([120, 37, 64])
    mask = torch.arange(120)[None] < lengths[:, None]  # (B, F)
    features = torch.randn(3, 8, 120, generator=seeded()) * mask[:, None]  # padded with zeros
    tgt_in = torch.tensor([[2, 5, 6, 7], [2, 8, PAD, PAD], [2, 9, 10, PAD]])
    tgt_out = torch.tensor([[5, 6, 7, EOS], [8, EOS, PAD, PAD], [9, 10, EOS, PAD]])
    ctc_lengths = (tgt_in[:, 1:] != PAD).sum(1)
    ctc_targets = tgt_in[:, 1:][tgt_in[:, 1:] != PAD]  # each transcript, one after the other

    def run(m, device):
        logits, ctc_logits, positions = m(
            features.to(device), tgt_in.to(device), src_mask=mask.to(device), ctc=True
        )  # (B, T, V), (B, L, V), (B, L)
        out = label_smoothed_cross_entropy(logits, tgt_out.to(device), 0.1, PAD)
        ctc = F.ctc_loss(
            torch.log_softmax(ctc_logits, -1).transpose(0, 1), ctc_targets.to(device),
            positions.sum(-1), ctc_lengths.to(device), blank=PAD, reduction="sum",
        )  # fmt: skip
        loss = (0.7 * out.loss + 0.3 * ctc) / out.n_tokens  # as objectives/speech.py weighs them
        loss.backward()
        return {"logits": logits, "ctc logits": ctc_logits, "positions": positions, "loss": loss}

    return model, run


CASES = {"image-gpt": image_gpt_case, "caption": caption_case, "clip": clip_case,
         "detr": detr_case, "speech": speech_case}  # fmt: skip


@pytest.mark.parametrize("family", list(CASES))
def test_forward_loss_and_gradients_on_the_device_equal_the_cpu(family, device):
    """Relative 1e-5 of each output's largest (fp32 kernels in another order), 1e-4 of each
    gradient's; masks and the Hungarian matching exactly."""
    cpu, run = CASES[family]()
    on_device = copy.deepcopy(cpu).to(device)
    ref, ours = run(cpu, torch.device("cpu")), run(on_device, device)
    for name, want in ref.items():
        if want.is_floating_point():
            assert ours[name].device.type == device.type, name
            assert_rel_close(ours[name], want, 1e-5, f"{family}: {name}")
        else:
            assert torch.equal(ours[name].cpu(), want), f"{family}: {name}"
    assert_gradients_close(on_device, cpu, family)


def test_log_mel_features_on_the_device_equal_the_cpus(device):
    """Whisper's front end (data/audio.py log_mel: STFT, mel filters, log, each clip's floor) on
    the device, a batch of two tone clips (speech training's words) over a little noise.

    Relative 2e-4: cuFFT and the CPU's FFT round differently, ~1e-7 of a spectrum's largest, and
    the log turns that into an error that grows as a band's power falls towards the clip's floor
    (8 decades under its peak); 3.9e-5 measured on an H100."""
    words = [["do", "re", "mi"], ["la", "so", "fa"]]
    samples = torch.stack([speech_run.speak(w) for w in words])  # (B, samples)
    samples += 1e-3 * torch.randn(samples.shape, generator=seeded())
    want = log_mel(samples, pad_to=None)  # (B, 80, F)
    got = log_mel(samples.to(device), pad_to=None)
    assert got.device.type == device.type
    assert_rel_close(got, want, 2e-4, "log-mel features")


# ---- (b) decoding ----


def test_greedy_image_sampling_and_likelihoods_on_the_device_equal_the_cpu(device):
    """Untied output embeddings, as for the captions below: tied, a random model repeats its
    input token, one level over the whole image."""
    cpu = image_gpt(seed=0, tie_embeddings=False)
    on_device = copy.deepcopy(cpu).to(device)
    prefixes = [[TOKENS.label_token("b")], TOKENS.prefix(name="xyx"), [START]]
    want = sample_images(cpu, TOKENS, prefixes, temperature=0.0)  # (N, 1, 3, 3)
    tokens = TOKENS.quantise(want)  # (N, H * W): the pixel tokens chosen
    margins = greedy_margins(cpu, prefixes, tokens, TOKENS.n_pixels,
                             suppress=TOKENS.non_pixel_ids())  # fmt: skip
    assert margins.min() > MIN_MARGIN  # no near-tie to flip
    assert torch.equal(sample_images(on_device, TOKENS, prefixes, temperature=0.0), want)

    images = torch.randint(0, 256, (5, 1, 3, 3), dtype=torch.uint8, generator=seeded())
    rows = [[START], TOKENS.prefix(label="a"), TOKENS.prefix(name="yy"), [START], [START]]
    ref = image_log_likelihoods(cpu, TOKENS, images, rows, batch_size=2)
    assert_rel_close(image_log_likelihoods(on_device, TOKENS, images, rows, batch_size=2), ref,
                     1e-5, "log-likelihoods")  # fmt: skip

    # drawn with the device's own generator (as Pipeline.generate makes it): whole images
    gen = torch.Generator(device=device).manual_seed(0)
    drawn = sample_images(on_device, TOKENS, [[START]] * 4, generator=gen)
    assert drawn.shape == (4, 1, 3, 3) and set(drawn.unique().tolist()) <= {32, 96, 160, 224}


def test_greedy_captions_on_the_device_equal_the_cpu(device):
    """Untied output embeddings: a random model with tied ones repeats its input token (<s>)
    whatever the image; this one writes other captions for other images, some ended by </s>."""
    cpu = captioner(seed=0, tie_embeddings=False)
    images = caption_pixels(4)
    want, scores = T.greedy_search(cpu, images, max_len_a=0, max_len_b=6, return_scores=True)
    assert greedy_margins(cpu, images, want, 6).min() > MIN_MARGIN
    ids, got = T.greedy_search(copy.deepcopy(cpu).to(device), images, max_len_a=0, max_len_b=6,
                               return_scores=True)  # fmt: skip
    assert ids.device.type == device.type and ids.tolist() == want.tolist()
    assert_rel_close(got, scores, 1e-5, "caption scores")


def test_greedy_transcripts_on_the_device_equal_the_cpu(device):
    """Real log-mel features of tone clips, a padded batch with its frame mask (what transcribe
    decodes), from a forced prefix, with a suppressed token and </s> barred from the start."""
    torch.manual_seed(0)
    cpu = T.build_model(speech_config(tie_embeddings=False)).eval()  # as the captioner's
    with torch.no_grad():  # a sharper output distribution than at initialisation
        cpu.lm_head.weight.mul_(4)
    clips = [speech_run.speak(w) for w in (["do", "re", "mi"], ["la"], ["so", "fa"])]
    features, mask = features_batch(clips, n_mels=8, pad_to=None)  # (B, 8, F), (B, F)
    options = dict(prefix=[2, 5], suppress_tokens=[6], begin_suppress_tokens=[EOS])

    def transcribe(model):
        return T.greedy_search(model, features, max_len_a=0, max_len_b=6, src_mask=mask,
                               return_scores=True, **options)  # fmt: skip

    want, scores = transcribe(cpu)
    margins = greedy_margins(cpu, features, want, 6, src_mask=mask, prefix=[2, 5], suppress=[6],
                             begin_suppress=[EOS])  # fmt: skip
    assert margins.min() > MIN_MARGIN
    ids, got = transcribe(copy.deepcopy(cpu).to(device))
    assert ids.device.type == device.type and ids.tolist() == want.tolist()
    assert_rel_close(got, scores, 1e-5, "transcript scores")


def test_detections_on_the_device_equal_the_cpus(tmp_path, device):
    """Pipeline.detect (resizing, thresholding, boxes in the image's pixels) and every query's
    prediction (what COCO evaluation ranks), from one saved detector loaded on either device."""
    torch.manual_seed(3)  # a detector whose queries tell these images' classes apart
    save_model(T.build_model(detector_config()).eval(), tmp_path / "detr",
               labels=["square", "bar", "ring"])  # fmt: skip
    cpu, on_device = Pipeline.load(tmp_path / "detr"), Pipeline.load(tmp_path / "detr", device)
    square, bar, half = np.zeros((1, 32, 32)), np.zeros((1, 40, 48)), np.zeros((1, 32, 32))
    square[:, 4:12, 4:12] = bar[:, 20:24, 10:34] = half[:, :16] = 255  # the bar's image resized
    images = [x.astype(np.uint8) for x in (square, bar, half)]
    pixels, _ = read_images(images, 1, 32)  # (B, 1, 32, 32) uint8, as detect resizes them
    scores, labels, boxes = all_predictions(cpu, pixels)  # (B, Q) each, (B, Q, 4)
    # no near-tie to flip: a query's class, its score against the threshold or the next score
    probs = cpu.model(to_pixels(pixels))[0].softmax(-1)[..., :-1]  # (B, Q, K)
    top2 = probs.topk(2, dim=-1).values
    assert (top2[..., 0] - top2[..., 1]).min() > MIN_MARGIN
    threshold = 0.3
    assert (scores - threshold).abs().min() > MIN_MARGIN
    assert (scores.sort(dim=-1).values.diff(dim=-1)).min() > MIN_MARGIN

    got_scores, got_labels, got_boxes = all_predictions(on_device, pixels)
    assert torch.equal(got_labels, labels)
    assert_rel_close(got_scores, scores, 1e-5, "query scores")
    assert_rel_close(got_boxes, boxes, 1e-5, "query boxes")

    want, got = cpu.detect(images, threshold), on_device.detect(images, threshold)
    assert 0 < sum(map(len, want)) < scores.numel()  # some queries kept, some not
    assert [[o.label for o in objects] for objects in got] == [
        [o.label for o in objects] for objects in want
    ]
    for objects, reference in zip(got, want, strict=True):
        for o, r in zip(objects, reference, strict=True):
            assert o.score == pytest.approx(r.score, rel=1e-5)
            assert o.box == pytest.approx(r.box, abs=1e-3)  # pixels of a 48 x 40 image at most


# ---- (c) the trainer on the device ----
# Each family's tiny data and run config from its CPU test (tests/training), smaller.


def image_lm_values(root: Path) -> dict:
    image_lm_run.write_split(root / "train.safetensors", 32, 1)
    image_lm_run.write_split(root / "valid.safetensors", 8, 2)
    return image_lm_run.config(root, 4)


def caption_values(root: Path) -> dict:
    caption_run.write_split(root / "train.safetensors", 4, 1)
    caption_run.write_split(root / "valid.safetensors", 1, 2)
    return caption_run.config(root, 4)


def clip_values(root: Path) -> dict:
    clip_run.colour_split(root / "colours.safetensors", 8, 1)
    clip_run.grey_split(root / "grey.safetensors", 16, 2)
    clip_run.colour_split(root / "valid.safetensors", 2, 3)
    return clip_run.config(root, 4)


def detection_values(root: Path) -> dict:
    detection_run.write_coco(root / "train", 16, 1)
    detection_run.write_coco(root / "valid", 4, 2)
    return detection_run.config(root, 4)


def speech_values(root: Path) -> dict:
    speech_run.write_features(root / "train", speech_run.sentences(24, 1))
    speech_run.write_features(root / "valid", speech_run.sentences(4, 2))
    values = speech_run._config(root, 4)
    values["model"]["audio"]["ctc"] = True  # the joint CTC loss too
    values["train"].update(batch_tokens=600, warmup_steps=2)
    return values


RUNS = {"image_lm": image_lm_values, "caption": caption_values, "contrastive": clip_values,
        "detection": detection_values, "speech": speech_values}  # fmt: skip


@pytest.mark.parametrize("objective", list(RUNS))
def test_the_trainer_runs_each_family_on_the_device_and_resumes(
    objective, tmp_path, device, dry_run
):
    """4 steps in one run against a run stopped after step 3 and resumed from its checkpoint at
    step 2 (dropout, crops and flips drawn as trained: the RNG states, the CUDA one too, come
    back). The losses agree to a relative 1e-5, not bit for bit on CUDA (some backward kernels
    add with atomics in any order; test_training.py); each run validated on the device at its
    end."""
    tmp_path.joinpath("data").mkdir()
    values = RUNS[objective](tmp_path / "data")
    values["train"].update(device=device.type, save_every=2, valid_every=100)
    config = build_run_config(values)
    assert config.objective == objective
    full, cut = tmp_path / "full", tmp_path / "cut"
    said = []
    train(config, full, log=said.append)
    with pytest.raises(Runs.Crash):
        train(config, cut, log=lambda _: None, on_step=Runs.crash_at(3))
    assert [p.name for p in step_dirs(cut)] == ["step-000002"]
    train(config, cut, resume=True, log=said.append)
    where = "cpu" if dry_run else "cuda:0"  # train.device = "cuda" takes the first GPU
    header = [line for line in said if line.startswith("model: ")]
    assert len(header) == 2 and all(f"; device {where}, 1 process(es)" in line for line in header)
    assert Runs.steps(cut, "train") == Runs.steps(full, "train") == [1, 2, 3, 4]
    ours, uninterrupted = Runs.losses(cut), Runs.losses(full)
    for step, loss in uninterrupted.items():
        assert math.isfinite(loss) and ours[step] == pytest.approx(loss, rel=1e-5, abs=0), step
    for run in (full, cut):
        (valid,) = Runs.valid_records(run)
        numbers = [v for v in valid.values() if isinstance(v, float)]
        assert valid["step"] == 4 and numbers and all(map(math.isfinite, numbers)), valid
        for checkpoint in step_dirs(run):
            (rng,) = json.loads((checkpoint / "state.json").read_text())["rng"]  # one process
            assert ("cuda" in rng) == (not dry_run), checkpoint
