"""Drawing a detector's objects: draw_boxes (small images scaled up, each box and its tab in its
class's colour, the tab inside the image at the top edge, written as PNG); detection_attention (the
objects Pipeline.detect keeps, each query's map = the chosen layer's cross-attention averaged over
heads) and its figure (one panel per object, or the image and a title saying none was found); and
`transformer attention --image` for a detector, with and without --detection, and --detection on a
model that is not a detector (one line, status 2)."""

import numpy as np
import pytest
import torch

from tests.cli.common import run
from tests.viz.detector import LABELS, tiny_detector
from transformer.data.image_tensors import to_pixels
from transformer.decoding.detect import DetectedObject
from transformer.decoding.pipeline import Pipeline

Image = pytest.importorskip("PIL.Image")


@pytest.fixture
def closed_figures(monkeypatch):
    """The matplotlib figures the code under test closes, kept for inspection."""
    plt = pytest.importorskip("matplotlib.pyplot")
    figures, close = [], plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: (figures.append(fig), close(fig))[1])
    return figures


@pytest.fixture(scope="module")
def detector(tmp_path_factory):
    """(pipeline, one 32 x 32 image uint8 (1, 1, 32, 32)): queries that favour "dog" with
    probabilities spread out, so that a threshold keeps some and not others."""
    path = tiny_detector(tmp_path_factory.mktemp("det") / "det", bias={1: 2.0})
    g = torch.Generator().manual_seed(0)
    return Pipeline.load(path), torch.randint(
        0, 256, (1, 1, 32, 32), generator=g, dtype=torch.uint8
    )


def colour_count(pixels: np.ndarray, colour) -> int:
    return int((pixels == np.array(colour, np.uint8)).all(-1).sum())


def test_draw_boxes_scales_small_images_and_colours_each_class(tmp_path):
    from transformer.viz.boxes import MIN_SIDE, PALETTE, class_colour, draw_boxes

    image = np.full((1, 32, 48), 128, np.uint8)  # grey, 48 wide, 32 high
    objects = [
        DetectedObject("dog", 0.93, (8.0, 12.0, 24.0, 28.0)),
        DetectedObject("cat", 0.5, (30.0, 0.0, 46.0, 10.0)),  # at the top edge
    ]
    out = tmp_path / "new" / "boxes.png"
    picture = draw_boxes(image, objects, out, labels=LABELS)
    s = 8  # the whole factor that brings 48 to at least 384
    assert picture.size == (48 * s, 32 * s) and max(picture.size) >= MIN_SIDE
    with Image.open(out) as written:
        assert written.format == "PNG" and np.array_equal(np.asarray(written), np.asarray(picture))
    pixels = np.asarray(picture)
    dog, cat = class_colour("dog", LABELS), class_colour("cat", LABELS)
    assert (dog, cat) == (PALETTE[1], PALETTE[0])
    assert tuple(pixels[20 * s, 8 * s]) == dog and tuple(pixels[20 * s, 24 * s - 1]) == dog  # edges
    assert tuple(pixels[20 * s, 16 * s]) == (128, 128, 128)  # inside the box: the image
    # dog's tab above its box, none below its top edge; cat's (no room above) inside its box
    assert colour_count(pixels[12 * s - 10 : 12 * s, 8 * s + 2 : 8 * s + 30], dog) > 100
    assert colour_count(pixels[12 * s + 3 : 12 * s + 13, 8 * s + 3 : 8 * s + 30], dog) == 0
    assert colour_count(pixels[3:13, 30 * s + 3 : 30 * s + 30], cat) > 100
    # a large image keeps its size; a class not in labels gets a colour from its name, every time
    big = draw_boxes(Image.new("L", (500, 400)), [DetectedObject("zebra", 1.0, (0, 0, 10, 10))])
    assert big.size == (500, 400) and big.mode == "RGB"
    assert class_colour("zebra") == class_colour("zebra", LABELS) in PALETTE
    with pytest.raises(ValueError, match="give a .png file name"):
        draw_boxes(image, objects, tmp_path / "boxes.jpg")


def test_detection_attention_is_detects_objects_with_their_querys_weights(detector):
    from transformer.viz.detection_attention import detection_attention

    pipeline, image = detector
    model, pixels = pipeline.model, to_pixels(image)
    with torch.no_grad():
        scores, _, boxes = (x[0] for x in model.detect(pixels))
    ranked = scores.sort(descending=True).values
    threshold = float(ranked[1:3].mean())  # between the second and the third: two objects
    r = detection_attention(model, pixels, LABELS, threshold)
    found = pipeline.detect([image[0].numpy()], threshold=threshold)[0]
    assert len(r.objects) == 2 and r.best == pytest.approx(float(ranked[0]))
    assert [o.label for o in r.objects] == [o.label for o in found]
    assert [o.score for o in r.objects] == pytest.approx([o.score for o in found], abs=1e-6)
    assert [o.query for o in r.objects] == sorted(
        (q for q in range(5) if scores[q] >= threshold), key=lambda q: -scores[q]
    )
    queries = [o.query for o in r.objects]
    assert torch.allclose(torch.tensor([o.box for o in r.objects]), boxes[queries], atol=1e-6)
    with torch.no_grad():
        weights = model.attention(pixels)[2]  # [(1, H, Q, P)] per decoder layer
    for layer, index in ((0, 0), (-1, 1)):
        r = detection_attention(model, pixels, LABELS, threshold, layer=layer)
        assert (r.layer, r.n_layers, r.n_heads) == (index, 2, 4)
        for o in r.objects:
            assert o.attention.shape == (4, 4)  # the 4 x 4 feature map, row-major
            assert torch.allclose(o.attention.flatten(), weights[index][0, :, o.query].mean(0))
            assert float(o.attention.sum()) == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ValueError, match="layers 0-1"):
        detection_attention(model, pixels, LABELS, layer=2)


def test_the_figure_has_the_image_then_one_panel_per_object(
    detector, tmp_path, closed_figures, monkeypatch
):
    from matplotlib.patches import Rectangle

    from transformer.viz import detection_attention as module

    pipeline, image = detector
    r = module.detection_attention(pipeline.model, to_pixels(image), LABELS, 0.0)
    assert len(r.objects) == 5
    monkeypatch.setattr(module, "MAX_PANELS", 3)  # the 3 most likely drawn
    out = module.plot_detection_attention(r, image[0], tmp_path / "a.png", labels=LABELS)
    with Image.open(out) as png:
        assert png.format == "PNG"
    (fig,) = closed_figures
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 4
    assert [ax.get_title() for ax in panels[1:]] == [
        f"{o.label} {o.score:.2f}" for o in r.objects[:3]
    ]
    boxes = lambda ax: [p for p in ax.patches if isinstance(p, Rectangle)]  # noqa: E731
    assert len(boxes(panels[0])) == 5 and all(len(boxes(ax)) == 1 for ax in panels[1:])
    assert all(len(ax.images) == 2 for ax in panels[1:])  # the image in grey, the map over it


def test_no_object_is_said_in_the_title(tmp_path, closed_figures):
    from transformer.viz.detection_attention import detection_attention, plot_detection_attention

    pipeline = Pipeline.load(tiny_detector(tmp_path / "none", bias={3: 8.0}))  # "no object" wins
    image = torch.zeros(1, 32, 32, dtype=torch.uint8)
    r = detection_attention(pipeline.model, to_pixels(image[None]), LABELS, 0.5)
    assert r.objects == [] and r.best < 0.5
    plot_detection_attention(r, image, tmp_path / "none.svg")
    (fig,) = closed_figures
    (panel,) = [ax for ax in fig.axes if ax.images]
    assert panel.get_title().startswith("no object scored ≥ 0.5 (best ")
    assert (tmp_path / "none.svg").read_text().startswith("<?xml")


def picture(path, width: int = 60, height: int = 40) -> str:
    pixels = np.random.default_rng(0).integers(0, 256, (height, width), dtype=np.uint8)
    Image.fromarray(pixels).save(path)
    return str(path)


def test_attention_command_draws_a_detectors_objects(tmp_path, capsys):
    det = tiny_detector(tmp_path / "det", bias={1: 8.0})  # every query finds a dog
    image = picture(tmp_path / "x.png")  # 60 x 40: resized to the model's 32 x 32
    for flags in (["--detection"], [], ["--detection", "--threshold", "0.9", "--layer", "0"]):
        out = tmp_path / f"a{len(flags)}.png"
        argv = ["attention", det, "--image", image, *flags, "--out", out, "--device", "cpu"]
        rc, stdout, err = run(argv, capsys)
        assert rc == 0, err
        layer = "layer 0 of 0-1" if "--layer" in flags else "layer 1 of 0-1"
        assert stdout == (
            f"wrote {out}: cross-attention of each object's query, {layer}, mean of 4 heads; "
            f"5 object(s) at or above {0.9 if '--threshold' in flags else 0.5:g}\n"
        )
        with Image.open(out) as png:
            assert png.format == "PNG"


def test_attention_detection_on_other_models_is_one_line(tmp_path, capsys):
    from transformer import build_model, save_model
    from transformer.config import cpu_tiny

    vit = cpu_tiny(
        vocab_size=1,
        pad_id=0,
        bos_id=0,
        eos_id=0,
        arch="encoder",
        n_classes=2,
        vision={"image_size": 32, "patch_size": 8, "channels": 1},
    )
    clf = save_model(build_model(vit), tmp_path / "vit", labels=["a", "b"])
    image, out = picture(tmp_path / "x.png", 32, 32), tmp_path / "a.png"
    det = tiny_detector(tmp_path / "det")
    for argv, words in (
        ([clf, "--image", image, "--detection"], "--detection needs an object detector"),
        ([clf, "--image", image, "--threshold", "0.3"], "--threshold is for a detector's objects"),
        ([det, "--text", "a cat", "--detection"], "--detection draws where a detector's object"),
        ([det, "--text", "a cat"], "this is an object detector: give --image"),
        ([det, "--image", image, "--threshold", "2"], "--threshold 2.0: give a probability"),
    ):
        rc, stdout, err = run(["attention", *argv, "--out", out, "--device", "cpu"], capsys)
        assert (rc, stdout, err.count("\n")) == (2, "", 1) and words in err, err
    assert not out.exists()
