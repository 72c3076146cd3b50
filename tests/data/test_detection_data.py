"""Detection data: the canvases' boxes are tight and keep the overlap limit, the splits share no
source image, a build is reproducible, the COCO files round-trip (through load_detection and
pycocotools), a user's COCO folder of other sizes loads, and bad input is one line naming the file."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from tests.cli.common import run
from transformer.cli.data.tasks import DETECTION_MIN_SIZE
from transformer.data.coco import DetectionDataError, load_detection
from transformer.data.images import (
    FASHION_MNIST_DIR,
    FASHION_MNIST_LABELS,
    read_fashion_mnist,
    stratified_split,
)
from transformer.data.sources.canvases import (
    MAX_COVER,
    MAX_IOU,
    MIN_IMAGE_SIZE,
    build_detection,
    iou,
    render_canvas,
)

needs_fashion_mnist = pytest.mark.skipif(
    not FASHION_MNIST_DIR.is_dir(), reason="apt-get install -y dataset-fashion-mnist (make setup)"
)


def items(n: int = 40, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """n 28 x 28 stand-ins for Fashion-MNIST items: a random patch of pixels 1..255 (some holes of
    0 inside) somewhere in each, and a label."""
    rng = np.random.default_rng(seed)
    images = np.zeros((n, 28, 28), np.uint8)
    for image in images:
        y0, x0 = rng.integers(0, 10, 2)
        y1, x1 = rng.integers(18, 29, 2)
        image[y0:y1, x0:x1] = rng.integers(0, 256, (y1 - y0, x1 - x0)) * (
            rng.random((y1 - y0, x1 - x0)) < 0.9
        )
    return images, rng.integers(0, 10, n)


def canvases(
    n: int, clutter: bool, max_objects: int = 6, size: int = 96, seed: int = 0, real=False
):
    images, labels = read_fashion_mnist()["test"] if real else items()
    rng = np.random.default_rng(seed)
    return [
        render_canvas(rng, images, labels, np.arange(len(images)), size, max_objects, clutter)
        for _ in range(n)
    ]


@pytest.mark.parametrize("real", [False, pytest.param(True, marks=needs_fashion_mnist)])
def test_a_single_items_box_is_tight_to_its_pixels(real):
    for canvas in canvases(30, clutter=False, max_objects=1, size=64, real=real):
        ((x0, y0, x1, y1),) = canvas.boxes
        rows, cols = np.flatnonzero(canvas.pixels.any(1)), np.flatnonzero(canvas.pixels.any(0))
        assert (x0, y0, x1, y1) == (cols[0], rows[0], cols[-1] + 1, rows[-1] + 1)
        assert x1 - x0 <= 45 and y1 - y0 <= 45  # each item scaled to 17..45 px


@pytest.mark.parametrize("real", [False, pytest.param(True, marks=needs_fashion_mnist)])
def test_boxes_touch_pixels_on_all_four_edges_and_hold_every_item_pixel(real):
    for canvas in canvases(40, clutter=False, real=real):
        p, inside = canvas.pixels, np.zeros(canvas.pixels.shape, bool)
        assert 1 <= len(canvas.boxes) <= 6 and len(canvas.labels) == len(canvas.boxes)
        for x0, y0, x1, y1 in canvas.boxes:
            assert (
                p[y0, x0:x1].any()
                and p[y1 - 1, x0:x1].any()
                and p[y0:y1, x0].any()
                and p[y0:y1, x1 - 1].any()
            )
            inside[y0:y1, x0:x1] = True
        assert not p[~inside].any()  # with clutter off, every pixel > 0 is in a box


def test_the_overlap_limit_holds():
    boxes = [canvas.boxes for canvas in canvases(200, clutter=True, max_objects=10, size=64)]
    assert sum(len(b) for b in boxes) > 2 * len(boxes)  # a crowded test: many pairs to check
    for a, b in (pair for canvas in boxes for pair in itertools.combinations(canvas, 2)):
        inter = max(0, min(a[2], b[2]) - max(a[0], b[0])) * max(
            0, min(a[3], b[3]) - max(a[1], b[1])
        )
        smaller = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
        assert iou(a, b) <= MAX_IOU and inter <= MAX_COVER * smaller
    assert iou((0, 0, 10, 10), (5, 0, 15, 10)) == pytest.approx(50 / 150)


def test_clutter_stays_off_the_boxes_and_adds_noise():
    noisy = canvases(30, clutter=True, seed=3)
    assert sum(len(c.clutter) for c in noisy) > 0
    for canvas in noisy:
        background = np.ones(canvas.pixels.shape, bool)
        for a, b in itertools.product(canvas.clutter, canvas.boxes):
            assert min(a[2], b[2]) <= max(a[0], b[0]) or min(a[3], b[3]) <= max(a[1], b[1])  # apart
        for x0, y0, x1, y1 in canvas.boxes + canvas.clutter:
            assert 6 <= x1 - x0 and 6 <= y1 - y0
            background[y0:y1, x0:x1] = False
        noise = canvas.pixels[background]
        assert (
            0.4 < (noise > 0).mean() < 0.55 and noise.max() < 50
        )  # N(0, 8), rounded, clipped at 0


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if not FASHION_MNIST_DIR.is_dir():
        pytest.skip("apt-get install -y dataset-fashion-mnist (make setup)")
    out = tmp_path_factory.mktemp("detection") / "d"
    return out, build_detection(out, n_train=20, n_valid=8, n_test=8, image_size=80, seed=0)


def files_of(folder) -> dict:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@needs_fashion_mnist
def test_splits_use_disjoint_source_images(built):
    _, report = built
    (train_set, train), (valid_set, valid), (test_set, test) = (
        report["sources"][s] for s in ("train", "valid", "test")
    )
    assert (train_set, valid_set, test_set) == ("train", "train", "test")
    held_out = stratified_split(read_fashion_mnist()["train"][1], 5000, 0)[1]
    assert set(valid) <= set(held_out) and not set(train) & set(held_out)
    assert len(test) and test.max() < 10000
    assert report["canvases"] == {"train": 20, "valid": 8, "test": 8}


@needs_fashion_mnist
def test_two_builds_from_one_seed_are_byte_identical(built, tmp_path):
    out, _ = built
    build_detection(tmp_path / "again", n_train=20, n_valid=8, n_test=8, image_size=80, seed=0)
    first, again = files_of(out), files_of(tmp_path / "again")
    assert len(first) == 20 + 8 + 8 + 3 + 1
    assert {k: v for k, v in first.items() if k != "PROVENANCE.md"} == {
        k: v for k, v in again.items() if k != "PROVENANCE.md"
    }
    build_detection(tmp_path / "other", n_train=5, n_valid=8, n_test=8, image_size=80, seed=0)
    other = files_of(tmp_path / "other")  # a split does not change with another's count
    assert all(other[k] == first[k] for k in first if k.startswith(("test/", "valid/")))
    build_detection(tmp_path / "seed1", n_train=20, n_valid=0, n_test=0, image_size=80, seed=1)
    assert (
        files_of(tmp_path / "seed1")["train/images/000000.png"] != first["train/images/000000.png"]
    )


@needs_fashion_mnist
def test_the_coco_files_round_trip(built):
    from PIL import Image

    out, report = built
    coco = json.loads((out / "train" / "annotations.json").read_text())
    data = load_detection(out / "train", 1, 80)
    assert data.images.shape == (20, 1, 80, 80) and data.image_ids == list(range(20))
    assert data.names == list(FASHION_MNIST_LABELS) and data.category_ids == list(range(1, 11))
    assert data.sizes == [(80, 80)] * 20 and data.skipped == {"crowd": 0, "empty": 0}
    assert np.array_equal(
        data.images[3, 0].numpy(), np.asarray(Image.open(out / "train" / "images" / "000003.png"))
    )
    assert sum(len(b) for b in data.boxes) == len(coco["annotations"]) == report["objects"]["train"]
    for a in coco["annotations"]:
        assert a["bbox"][2] * a["bbox"][3] == a["area"] and a["iscrowd"] == 0 and a["id"] >= 1
    first = [a for a in coco["annotations"] if a["image_id"] == 0]
    x, y, w, h = np.array([a["bbox"] for a in first], dtype=np.float64).T
    expected = np.stack([(x + w / 2) / 80, (y + h / 2) / 80, w / 80, h / 80], 1)
    assert np.allclose(data.boxes[0].numpy(), expected) and data.boxes[0].dtype.is_floating_point
    assert data.labels[0].tolist() == [a["category_id"] - 1 for a in first]
    same = load_detection(
        out / "train" / "annotations.json", 3, 40
    )  # the file itself; RGB, resized
    assert same.images.shape == (20, 3, 40, 40) and all(
        a.equal(b) for a, b in zip(same.boxes, data.boxes, strict=True)
    )


@needs_fashion_mnist
def test_pycocotools_reads_our_annotations_and_scores_them_perfect(built, capsys):
    coco_module = pytest.importorskip("pycocotools.coco")
    from pycocotools.cocoeval import COCOeval

    out, report = built
    truth = coco_module.COCO(str(out / "valid" / "annotations.json"))
    assert len(truth.getCatIds()) == 10 and len(truth.getImgIds()) == 8
    assert len(truth.getAnnIds()) == report["objects"]["valid"]
    guesses = truth.loadRes([{**a, "score": 1.0} for a in truth.loadAnns(truth.getAnnIds())])
    evaluation = COCOeval(truth, guesses, "bbox")
    evaluation.evaluate()
    evaluation.accumulate()
    evaluation.summarize()
    assert evaluation.stats[0] == pytest.approx(1.0)  # the boxes as guesses: AP 1


def write_png(path, size, mode="RGB", color=(200, 100, 50)):
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new(mode, size, color).save(path)


def users_coco(tmp_path, file="annotations.json", folder="images"):
    """A user's COCO data: two images of other sizes (bare file names), non-contiguous category
    ids, a crowd annotation, an empty box and a box spilling out of its image."""
    write_png(tmp_path / folder / "a.png", (120, 80))
    write_png(tmp_path / folder / "b.jpg", (50, 200), mode="L", color=90)
    coco = {
        "images": [
            {"id": 11, "file_name": "a.png", "width": 120, "height": 80},
            {"id": 12, "file_name": "b.jpg"},
        ],
        "annotations": [
            {"id": 1, "image_id": 11, "category_id": 7, "bbox": [12, 8, 60, 40]},
            {"id": 2, "image_id": 12, "category_id": 3, "bbox": [40, 150, 20, 100], "iscrowd": 0},
            {"id": 3, "image_id": 12, "category_id": 3, "bbox": [0, 0, 10, 10], "iscrowd": 1},
            {"id": 4, "image_id": 11, "category_id": 3, "bbox": [5, 5, 0, 9]},
        ],
        "categories": [{"id": 7, "name": "cat"}, {"id": 3, "name": "dog"}],
    }
    path = tmp_path / file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(coco))
    return path, coco


def test_a_users_coco_folder_of_other_sizes_loads_resized(tmp_path):
    users_coco(tmp_path)
    data = load_detection(tmp_path, 3, 32)
    assert data.images.shape == (2, 3, 32, 32)
    assert data.images[0, :, 5, 5].tolist() == [200, 100, 50]
    assert data.images[1, :, 5, 5].tolist() == [90, 90, 90]
    assert data.sizes == [(120, 80), (50, 200)] and data.image_ids == [11, 12]
    assert data.names == ["dog", "cat"] and data.category_ids == [3, 7]  # sorted by id
    assert data.skipped == {"crowd": 1, "empty": 1}
    assert [t.tolist() for t in data.labels] == [[1], [0]]
    assert np.allclose(data.boxes[0].numpy(), [[42 / 120, 28 / 80, 60 / 120, 40 / 80]])
    clipped = [[45 / 50, 175 / 200, 10 / 50, 50 / 200]]  # x 40..60 -> 40..50, y 150..250 -> ..200
    assert np.allclose(data.boxes[1].numpy(), clipped)
    assert load_detection(tmp_path / "annotations.json", 1, 16).images.shape == (2, 1, 16, 16)


def test_cocos_own_layout(tmp_path):
    path, _ = users_coco(tmp_path, file="annotations/instances_val2017.json", folder="val2017")
    assert load_detection(path, 1, 20).images.shape == (2, 1, 20, 20)


def test_an_image_without_annotations_has_no_boxes(tmp_path):
    path, coco = users_coco(tmp_path)
    coco["annotations"] = [a for a in coco["annotations"] if a["image_id"] == 11]
    path.write_text(json.dumps(coco))
    data = load_detection(tmp_path, 1, 8)
    assert data.boxes[1].shape == (0, 4) and data.labels[1].shape == (0,)


def breaks(case):
    """Each bad input: how to make it from a good folder, and a phrase of its message."""

    def edit(change):
        def apply(path, coco):
            change(coco)
            path.write_text(json.dumps(coco))

        return apply

    return {
        "no annotations": (
            lambda path, coco: path.unlink(),
            "has no annotations.json: give a split directory",
        ),
        "not JSON": (lambda path, coco: path.write_text("{oops"), "is not JSON"),
        "a list": (lambda path, coco: path.write_text("[]"), "holds a JSON list, not an object"),
        "no categories": (edit(lambda c: c.pop("categories")), "has no categories list"),
        "no bbox": (edit(lambda c: c["annotations"][0].pop("bbox")), "annotations[0] has no bbox"),
        "unknown image": (
            edit(lambda c: c["annotations"][0].update(image_id=99)),
            "annotation 1 points at image 99",
        ),
        "unknown category": (
            edit(lambda c: c["annotations"][0].update(category_id=5)),
            "annotation 1 points at category 5",
        ),
        "bad bbox": (
            edit(lambda c: c["annotations"][0].update(bbox=[1, 2, 3])),
            "annotation 1 has bbox [1, 2, 3]",
        ),
        "no image file": (
            lambda path, coco: (path.parent / "images" / "b.jpg").unlink(),
            "b.jpg not found",
        ),
        "no image folder": (
            lambda path, coco: (path.parent / "images" / "a.png").unlink(),
            "a.png is in none of",
        ),
        "unreadable image": (
            lambda path, coco: (path.parent / "images" / "b.jpg").write_bytes(b"junk"),
            "cannot be read as an image",
        ),
        "wrong size": (
            edit(lambda c: c["images"][0].update(width=100)),
            "is 120 x 80 pixels, the annotations say 100 x 80",
        ),
    }[case]


@pytest.mark.parametrize(
    "case",
    [
        "no annotations",
        "not JSON",
        "a list",
        "no categories",
        "no bbox",
        "unknown image",
        "unknown category",
        "bad bbox",
        "no image file",
        "no image folder",
        "unreadable image",
        "wrong size",
    ],
)
def test_bad_input_is_one_line_naming_the_file(tmp_path, case):
    path, coco = users_coco(tmp_path)
    change, phrase = breaks(case)
    change(path, coco)
    with pytest.raises(DetectionDataError) as caught:
        load_detection(tmp_path, 1, 16)
    message = str(caught.value)
    assert len(message.splitlines()) == 1 and phrase in message, message
    assert str(tmp_path) in message


def test_bad_builder_arguments(tmp_path):
    with pytest.raises(DetectionDataError, match="image_size 44 is too small: give at least 45"):
        build_detection(tmp_path / "d", image_size=44)
    with pytest.raises(DetectionDataError, match="max_objects 0: give at least 1"):
        build_detection(tmp_path / "d", max_objects=0)
    (tmp_path / "f").write_text("x")
    with pytest.raises(DetectionDataError, match=f"--out {tmp_path / 'f'} is a file"):
        build_detection(tmp_path / "f")
    assert (
        DETECTION_MIN_SIZE == MIN_IMAGE_SIZE == 45
    )  # the CLI's copy of the minimum (it imports no torch)


@pytest.mark.parametrize(
    "flags, phrase",
    [
        (
            ["--image-size", "44"],
            "--image-size 44: give a canvas size of at least 45 pixels (the largest item, 1.6 x 28 px, must fit)",
        ),
        (["--max-objects", "0"], "--max-objects 0: give a number of at least 1"),
        (["--train", "-1"], "--train -1: give a number of canvases"),
        (["--source", "/nonexistent"], "apt-get install -y dataset-fashion-mnist"),
    ],
)
def test_the_cli_refuses_bad_arguments_in_one_line(tmp_path, capsys, flags, phrase):
    rc, out, err = run(["data", "detection", "--out", tmp_path / "d", *flags], capsys)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert err.startswith("transformer data detection: error: ") and phrase in err, err
    assert not (tmp_path / "d").exists()


@needs_fashion_mnist
def test_the_cli_says_what_it_wrote(tmp_path, capsys):
    rc, out, err = run(
        [
            "data",
            "detection",
            "--out",
            tmp_path,
            "--train",
            "3",
            "--valid",
            "2",
            "--test",
            "2",
            "--image-size",
            "48",
            "--max-objects",
            "1",
            "--no-clutter",
        ],
        capsys,
    )
    assert rc == 0 and len(out.splitlines()) == 1, err
    assert out.startswith(
        f"wrote {tmp_path}: train 3 canvases (3 objects), valid 2 (2), test 2 (2), 48 x 48"
    )
    assert "--no-clutter" in (tmp_path / "PROVENANCE.md").read_text()
