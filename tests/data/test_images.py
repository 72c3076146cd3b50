"""Image data: the IDX reader, the Fashion-MNIST builder's stratified split, class folders of image files,
and the one-line errors for bad image data."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from transformer.cli import main
from transformer.data.image_tensors import ImageError
from transformer.data.images import (
    FASHION_MNIST_DIR,
    load_images,
    read_idx,
    save_split,
    stratified_split,
)
from transformer.data.sources.fashion_mnist import build_fashion_mnist


def write_idx(path, array: np.ndarray, code: int = 0x08, compress: bool = False) -> None:
    header = bytes([0, 0, code, array.ndim]) + b"".join(struct.pack(">I", d) for d in array.shape)
    data = header + array.astype(array.dtype.newbyteorder(">")).tobytes()
    path.write_bytes(gzip.compress(data) if compress else data)


def test_idx_reader_against_files_it_did_not_write(tmp_path):
    images = np.random.default_rng(0).integers(0, 256, (5, 4, 3), dtype=np.uint8)
    write_idx(tmp_path / "x.idx", images)
    write_idx(tmp_path / "x.idx.gz", images, compress=True)
    for name in ("x.idx", "x.idx.gz"):
        got = read_idx(tmp_path / name)
        assert got.dtype == np.uint8 and got.shape == (5, 4, 3) and np.array_equal(got, images)
    ints = np.array([1, -2, 70000], dtype=np.int32)
    write_idx(tmp_path / "i.idx", ints, code=0x0C)
    assert read_idx(tmp_path / "i.idx").tolist() == [1, -2, 70000]
    (tmp_path / "bad.idx").write_bytes(b"\x01\x02\x08\x01abcd")
    with pytest.raises(ImageError, match="is not an IDX file"):
        read_idx(tmp_path / "bad.idx")
    (tmp_path / "short.idx").write_bytes((tmp_path / "x.idx").read_bytes()[:-3])
    with pytest.raises(ImageError, match=r"holds 57 bytes of data; its header \(5, 4, 3\) says 60"):
        read_idx(tmp_path / "short.idx")


def test_the_validation_split_is_stratified_and_reproducible():
    labels = np.repeat(np.arange(10), [600, 500, 700, 550, 650, 600, 600, 580, 620, 600])
    train, valid = stratified_split(labels, 500, seed=0)
    assert len(valid) == 500 and len(train) == len(labels) - 500 and not set(train) & set(valid)
    share = np.bincount(labels[valid], minlength=10) / np.bincount(labels, minlength=10)
    assert np.all(np.abs(share - 500 / len(labels)) < 0.003)  # each class in proportion
    again = stratified_split(labels, 500, seed=0)
    assert np.array_equal(again[1], valid)
    assert not np.array_equal(stratified_split(labels, 500, seed=1)[1], valid)


def test_fashion_mnist_builder_on_files_the_test_writes(tmp_path):
    rng = np.random.default_rng(0)
    for prefix, n in (("train", 200), ("t10k", 50)):
        write_idx(tmp_path / f"{prefix}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), compress=True)
        write_idx(tmp_path / f"{prefix}-labels-idx1-ubyte.gz", np.arange(n, dtype=np.uint8) % 10, compress=True)
    assert main(["data", "fashion-mnist", "--out", str(tmp_path / "out"), "--source", str(tmp_path), "--valid", "20"]) == 0
    train = load_images(tmp_path / "out" / "train.safetensors", 1, 28)
    valid = load_images(tmp_path / "out" / "valid.safetensors", 1, 28)
    test = load_images(tmp_path / "out" / "test.safetensors", 1, 28)
    assert (len(train.labels), len(valid.labels), len(test.labels)) == (180, 20, 50)
    assert valid.labels.bincount().tolist() == [2] * 10 and train.names[9] == "Ankle boot"
    with pytest.raises(ImageError, match=r"holds images of shape \(1, 28, 28\), the model takes \(3, 28, 28\)"):
        load_images(tmp_path / "out" / "train.safetensors", 3, 28)


@pytest.mark.skipif(not FASHION_MNIST_DIR.is_dir(), reason="apt-get install -y dataset-fashion-mnist (make setup)")
def test_the_real_fashion_mnist(tmp_path):
    counts = build_fashion_mnist(tmp_path, n_valid=5000, seed=0)
    assert counts == {"train": 55000, "valid": 5000, "test": 10000}
    valid = load_images(tmp_path / "valid.safetensors", 1, 28)
    assert valid.labels.bincount().tolist() == [500] * 10  # 6,000 per class in training: 500 each held out
    test = load_images(tmp_path / "test.safetensors", 1, 28)
    assert test.labels.bincount().tolist() == [1000] * 10 and test.images.dtype.is_floating_point is False


def test_missing_package_is_one_line(tmp_path, capsys):
    assert main(["data", "fashion-mnist", "--out", str(tmp_path / "o"), "--source", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "apt-get install -y dataset-fashion-mnist" in err


def _png(path, size=8, mode="L", color=128):
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new(mode, (size, size), color if mode == "L" else (color, 0, 255 - color)).save(path)


def test_class_folders_are_read_as_grayscale_or_rgb(tmp_path):
    _png(tmp_path / "cat" / "a.png", color=10)
    _png(tmp_path / "cat" / "b.PNG", mode="RGB", color=200)
    _png(tmp_path / "dog" / "c.png", color=250)
    gray = load_images(tmp_path, 1, 8)
    assert gray.names == ["cat", "dog"] and gray.labels.tolist() == [0, 0, 1]
    assert gray.images.shape == (3, 1, 8, 8) and int(gray.images[0, 0, 0, 0]) == 10
    rgb = load_images(tmp_path, 3, 8)
    assert rgb.images.shape == (3, 3, 8, 8) and rgb.images[1, :, 0, 0].tolist() == [200, 0, 55]


@pytest.mark.parametrize("problem", ["corrupt", "empty", "size"])
def test_bad_image_folders_name_the_file(tmp_path, problem):
    _png(tmp_path / "cat" / "a.png")
    if problem == "corrupt":
        (tmp_path / "cat" / "b.png").write_bytes(b"not a png")
        match = f"{tmp_path / 'cat' / 'b.png'} cannot be read as an image"
    elif problem == "empty":
        (tmp_path / "dog").mkdir()
        match = f"{tmp_path / 'dog'} is an empty class folder"
    else:
        _png(tmp_path / "dog" / "big.png", size=10)
        match = f"{tmp_path / 'dog' / 'big.png'} is 10 x 10 pixels; the model takes 8 x 8"
    with pytest.raises(ImageError, match=match.replace(".", r"\.")):
        load_images(tmp_path, 1, 8)


def test_a_prepared_split_round_trips(tmp_path):
    images = np.arange(2 * 3 * 4 * 4, dtype=np.uint8).reshape(2, 3, 4, 4)
    save_split(tmp_path / "s.safetensors", images, np.array([1, 0]), ["a", "b"])
    got = load_images(tmp_path / "s.safetensors", 3, 4)
    assert np.array_equal(got.images.numpy(), images) and got.labels.tolist() == [1, 0] and got.names == ["a", "b"]
    (tmp_path / "x.safetensors").write_bytes(b"junk")
    with pytest.raises(ImageError, match="is not a prepared image split"):
        load_images(tmp_path / "x.safetensors", 3, 4)
