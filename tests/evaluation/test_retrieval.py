"""Zero-shot and retrieval scores (evaluation.retrieval) on hand-made embeddings, and the
nearest-training-image baseline on hand-made pixels."""

from __future__ import annotations

import pytest
import torch

from transformer.evaluation.retrieval import (
    pixel_nearest_neighbour,
    recall_at_k,
    retrieval_scores,
)


def test_recall_at_k_counts_queries_with_a_relevant_key_in_their_top_k():
    similarity = torch.tensor([[0.9, 0.5, 0.1], [0.2, 0.3, 0.8], [0.7, 0.6, 0.5]])
    relevant = torch.tensor([[1, 0, 0], [1, 0, 0], [0, 0, 1]], dtype=torch.bool)
    # query 0: top-1 hit; query 1: its key ranks 3rd; query 2: its key ranks 3rd
    assert recall_at_k(similarity, relevant, ks=(1, 2, 3)) == {1: 1 / 3, 2: 1 / 3, 3: 1.0}


def test_retrieval_scores_both_ways():
    e = torch.eye(3)
    names = ["a", "b", "c"]
    images = torch.stack([e[0], e[0], e[1], (e[1] + 0.9 * e[2]) / 1.35])  # the last one: b, not c
    scores, predicted = retrieval_scores(images, e, [0, 0, 1, 2], names)
    assert predicted == [0, 0, 1, 1]
    assert scores.classification.accuracy == pytest.approx(3 / 4)
    assert scores.image_to_text[1] == pytest.approx(3 / 4) and scores.image_to_text[5] == 1.0
    # text a: images 0, 1 first; b: image 2 first; c: image 3 first (its only candidate near it)
    assert scores.text_to_image[1] == 1.0
    assert (scores.images, scores.names) == (4, 3)


def test_pixel_baseline_names_by_the_nearest_training_image_and_skips_unseen_names():
    train = torch.tensor([[0, 0], [100, 100], [250, 250]], dtype=torch.uint8).view(3, 1, 1, 2)
    test = torch.tensor([[10, 0], [240, 255], [90, 120], [0, 0]], dtype=torch.uint8).view(
        4, 1, 1, 2
    )
    result = pixel_nearest_neighbour(
        train, ["dark", "mid", "light"], test, ["dark", "light", "dark", "new"]
    )
    # nearest: dark, light, mid (a miss); the fourth's name was never trained on: not scored
    assert (result.hits, result.counted, result.total) == (2, 3, 4)
    assert result.accuracy == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="fit them to one shape"):
        pixel_nearest_neighbour(train, ["a"] * 3, test.view(4, 2, 1, 1), ["a"] * 4)
