"""Pipeline.embed_texts and Pipeline.embed_images of a dual encoder: lowercased texts, unknown
characters read as [UNK], batches that do not change a vector, images of other shapes fitted,
and a clear error for a model that is not a dual encoder."""

from __future__ import annotations

import pytest
import torch

from tests.model.dual_encoder import tiny_dual_encoder_dir
from transformer.data.image_tensors import fit_images
from transformer.decoding.inputs import PipelineError
from transformer.decoding.pipeline import Pipeline


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory) -> Pipeline:
    return Pipeline.load(tiny_dual_encoder_dir(tmp_path_factory.mktemp("clip") / "m"))


def test_texts_are_lowercased_and_unknown_characters_are_read(pipeline):
    texts = ["Red Square", "red square", "Ωmega ∂", "top", "bottom"]
    vectors = pipeline.embed_texts(texts)
    assert vectors.shape == (5, 16) and vectors.dtype == torch.float32
    assert torch.allclose(vectors.norm(dim=1), torch.ones(5), atol=1e-5)
    assert torch.equal(vectors[0], vectors[1])
    one_by_one = torch.cat([pipeline.embed_texts([t]) for t in texts])
    assert torch.allclose(one_by_one, vectors, atol=1e-5)  # padding in a batch changes nothing
    assert pipeline.embed_texts([]).shape == (0, 16)


def test_images_of_other_shapes_are_fitted(pipeline):
    grey = torch.randint(0, 256, (3, 1, 6, 6), dtype=torch.uint8)
    vectors = pipeline.embed_images(grey, batch_size=2)
    assert vectors.shape == (3, 16)
    assert torch.allclose(vectors, pipeline.embed_images(fit_images(grey, 3, 8)))
    with pytest.raises(PipelineError, match="pass uint8"):
        pipeline.embed_images(grey.float())


def test_a_model_that_is_not_a_dual_encoder_says_so(pipeline):
    from transformer.decoding.embed import embed_texts

    other = Pipeline(torch.nn.Linear(2, 2), None, None, pipeline.decode)
    with pytest.raises(PipelineError, match='objective = "contrastive"'):
        embed_texts(other, ["x"], batch_size=8)


def test_a_long_text_is_cut_to_the_text_towers_positions(tmp_path):
    tower = {"d_model": 24, "n_heads": 3, "positional": "learned", "max_positions": 8}
    pipeline = Pipeline.load(tiny_dual_encoder_dir(tmp_path / "m", text_tower=tower))
    assert pipeline.model.config.max_positions == 64  # the image tower's: not the text's limit
    long, cut = "red square top bottom", "red sq"  # 6 characters + [CLS] and [SEP] fill the 8
    assert torch.equal(pipeline.embed_texts([long]), pipeline.embed_texts([cut]))
    assert not torch.equal(pipeline.embed_texts([long]), pipeline.embed_texts(["red s"]))
