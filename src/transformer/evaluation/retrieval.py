"""Zero-shot classification and retrieval with a text-image dual encoder (CLIP), and a baseline
without one: the nearest training image by pixels.

The rules:
- Zero-shot classification: each image is given the nearest (highest cosine) of the split's
  distinct names, embedded as texts; accuracy, macro-F1 and the confusion matrix as a
  classifier's (evaluation.metrics.ClassificationScores).
- Retrieval recall@k, image -> text: the share of images whose name is among the k names nearest
  to it (over the split's distinct names: the same ranking as zero-shot, so recall@1 = accuracy).
- Retrieval recall@k, text -> image: the share of names with at least one of their images among
  the k images nearest to the name's text (over all the split's images).
- Pixel baseline: for each test image, its nearest training image by L2 distance on the raw
  pixels (0-255, after fitting both to one shape); a hit when that image has the test image's
  name. Only test images whose name occurs in training count: pixels cannot name an emoji never
  seen (an `unseen` split has none).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .metrics import ClassificationScores, classification_scores

RECALL_AT = (1, 5)
"""The k of recall@k that evaluation reports."""


def recall_at_k(similarity: torch.Tensor, relevant: torch.Tensor, ks=RECALL_AT) -> dict[int, float]:
    """similarity (N, M) of N queries against M keys, relevant (N, M) bool -> {k: the share of
    queries with a relevant key among their k most similar} (ties: torch.topk's order)."""
    out = {}
    for k in ks:
        top = similarity.topk(min(k, similarity.size(1)), dim=1).indices  # (N, k)
        out[k] = int(relevant.gather(1, top).any(dim=1).sum()) / len(top) if len(top) else 0.0
    return out


@dataclass
class RetrievalScores:
    """Zero-shot classification and recall@k both ways on one labelled image split."""

    classification: ClassificationScores
    image_to_text: dict[int, float]
    text_to_image: dict[int, float]
    images: int
    names: int


def retrieval_scores(
    image_embeddings: torch.Tensor, text_embeddings: torch.Tensor, gold: list[int], names: list[str]
) -> tuple[RetrievalScores, list[int]]:
    """Unit embeddings of N images (N, E) and of the split's distinct names (M, E), each image's
    name index (into names) -> the scores and each image's predicted name index."""
    similarity = image_embeddings.float() @ text_embeddings.float().T  # (N, M)
    gold_t = torch.tensor(gold, dtype=torch.long)
    relevant = torch.zeros_like(similarity, dtype=torch.bool)
    relevant[torch.arange(len(gold_t)), gold_t] = True  # (N, M): each image's one name
    predicted = similarity.argmax(dim=1).tolist()
    present = sorted(set(gold))  # names without images have nothing to retrieve
    scores = RetrievalScores(
        classification_scores(predicted, gold, names),
        recall_at_k(similarity, relevant),
        recall_at_k(similarity.T[present], relevant.T[present]),
        len(gold),
        len(names),
    )
    return scores, predicted


def embed_split(pipeline, images: torch.Tensor, names: list[str], batch_size: int | None = None):
    """(image embeddings (N, E), name embeddings (M, E)) of a split through a Pipeline."""
    return (
        pipeline.embed_images(images, batch_size=batch_size),
        pipeline.embed_texts(names, batch_size=batch_size),
    )


def score_retrieval(
    pipeline, path, batch_size: int | None = None
) -> tuple[RetrievalScores, list[int]]:
    """A dual encoder's zero-shot and retrieval scores on a labelled image split (a prepared
    .safetensors split or a folder of class folders; any shape, fitted to the model's), and each
    image's predicted name index into scores.classification.labels (the names, lowercased as
    training lowercases them)."""
    from ..data.images import open_images

    data = open_images(path)
    names = sorted({name.lower() for name in data.names})
    index = {name: i for i, name in enumerate(names)}
    gold = [index[data.names[i].lower()] for i in data.labels.tolist()]
    image_emb, text_emb = embed_split(pipeline, data.images, names, batch_size)
    return retrieval_scores(image_emb, text_emb, gold, names)


@dataclass
class PixelBaseline:
    """The nearest-training-image baseline (see the module doc)."""

    hits: int
    counted: int
    """Test images whose name occurs in the training images (the ones scored)."""
    total: int

    @property
    def accuracy(self) -> float:
        return self.hits / self.counted if self.counted else 0.0


def pixel_nearest_neighbour(
    train_images: torch.Tensor,
    train_names: list[str],
    test_images: torch.Tensor,
    test_names: list[str],
    chunk: int = 128,
) -> PixelBaseline:
    """uint8 images (N, C, H, W) of one shape with each one's name, for training and test ->
    PixelBaseline: how many test images' nearest training image (L2 on pixels) has their name."""
    if train_images.shape[1:] != test_images.shape[1:]:
        raise ValueError(
            f"training images {tuple(train_images.shape[1:])} and test images "
            f"{tuple(test_images.shape[1:])} differ: fit them to one shape first"
        )
    # float64: every sum of products of 0-255 values is exact, so no rounding breaks a near tie
    train = train_images.reshape(len(train_images), -1).double()  # (N, D)
    train_sq = (train * train).sum(1)  # (N,)
    seen = set(train_names)
    hits = counted = 0
    for start in range(0, len(test_images), chunk):
        test = test_images[start : start + chunk].reshape(-1, train.size(1)).double()  # (n, D)
        # |a - b|^2 = |a|^2 - 2 a.b + |b|^2; |a|^2 is the same for every candidate of a row
        distance = train_sq[None, :] - 2 * test @ train.T  # (n, N)
        nearest = distance.argmin(dim=1).tolist()
        for j, i in enumerate(nearest):
            name = test_names[start + j]
            if name in seen:
                counted += 1
                hits += train_names[i] == name
    return PixelBaseline(hits, counted, len(test_images))
