"""The detector (DETR): shapes, the positions in every attention against a plain computation, no
causal mask among the queries, images independent of their batch, config rules."""

import math

import pytest
import torch
import torch.nn.functional as F

from transformer.config import ConfigError, ModelConfig
from transformer.model.accounting import count_parameters, flops_per_image
from transformer.model.build import build_model
from transformer.model.detection import DetectionTransformer
from transformer.model.patches import sinusoidal_2d


def detector_config(**detection) -> ModelConfig:
    values = dict(image_size=32, stride=8, n_queries=5, backbone_channels=8)
    return ModelConfig(
        arch="encoder-decoder",
        d_model=32,
        n_heads=4,
        d_ff=64,
        n_encoder_layers=2,
        n_decoder_layers=2,
        dropout=0.0,
        positional="none",
        vocab_size=1,
        pad_id=0,
        bos_id=0,
        eos_id=0,
        n_classes=3,
        detection={**values, **detection},
    )


@pytest.mark.parametrize("backbone", ["cnn", "patches"])
def test_shapes_and_layers(backbone):
    torch.manual_seed(0)
    model = build_model(detector_config(backbone=backbone)).eval()
    assert isinstance(model, DetectionTransformer)
    pixels = torch.rand(3, 1, 32, 32) * 2 - 1
    logits, boxes = model(pixels)
    assert logits.shape == (3, 5, 4) and boxes.shape == (3, 5, 4)
    assert ((boxes >= 0) & (boxes <= 1)).all()
    all_logits, all_boxes = model(pixels, all_layers=True)
    assert all_logits.shape == (2, 3, 5, 4) and all_boxes.shape == (2, 3, 5, 4)
    torch.testing.assert_close(all_logits[-1], logits)
    torch.testing.assert_close(all_boxes[-1], boxes)
    scores, labels, found = model.detect(pixels)
    probs = logits.softmax(-1)[..., :3]
    torch.testing.assert_close(scores, probs.max(-1).values)
    assert torch.equal(labels, probs.argmax(-1)) and torch.equal(found, boxes)
    assert count_parameters(model) == sum(p.numel() for p in model.parameters())


def _attend(attn, query, key, value):
    """Multi-head attention written out: softmax((q Wq)(k Wk)^T / sqrt(d)) (v Wv) Wo."""
    h = attn.n_heads
    b, t, c = query.shape

    def split(x):
        return x.view(b, -1, h, c // h).transpose(1, 2)

    q, k, v = (
        split(F.linear(query, attn.q_proj.weight, attn.q_proj.bias)),
        split(F.linear(key, attn.k_proj.weight, attn.k_proj.bias)),
        split(F.linear(value, attn.v_proj.weight, attn.v_proj.bias)),
    )
    w = (q @ k.transpose(-1, -2) / math.sqrt(c // h)).softmax(-1)
    out = (w @ v).transpose(1, 2).reshape(b, t, c)
    return F.linear(out, attn.out_proj.weight, attn.out_proj.bias)


def test_positions_in_every_attention_match_a_plain_computation():
    """Post-norm DETR by hand: positions on queries and keys (never values) in each encoder
    self-attention, query embeddings on the decoder's queries and keys, memory positions on the
    cross-attention's keys; one shared norm on each decoder layer's output."""
    torch.manual_seed(1)
    cfg = detector_config().replace(norm_position="post")
    model = build_model(cfg).eval()
    pixels = torch.rand(2, 1, 32, 32) * 2 - 1
    pos = sinusoidal_2d(4, 32)[1:].unsqueeze(0)  # (1, 16, 32)
    x = model.backbone(pixels)
    for layer in model.encoder_layers:
        x = layer.norm1(x + _attend(layer.self_attn, x + pos, x + pos, x))
        x = layer.norm2(x + layer.feed_forward(x))
    memory = x
    queries = model.queries.weight.unsqueeze(0).expand(2, -1, -1)
    y = torch.zeros_like(queries)
    for layer in model.decoder_layers:
        y = layer.norm1(y + _attend(layer.self_attn, y + queries, y + queries, y))
        y = layer.norm2(y + _attend(layer.cross_attn, y + queries, memory + pos, memory))
        y = layer.norm3(y + layer.feed_forward(y))
    hidden = model.decoder_norm(y)
    logits, boxes = model(pixels)
    torch.testing.assert_close(logits, model.class_head(hidden), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(boxes, model.box_head(hidden), atol=1e-5, rtol=1e-5)


def test_queries_are_not_causal():
    """Permuting the object queries permutes the predictions: every query sees every other, in any
    order (a causal mask would break this)."""
    torch.manual_seed(2)
    model = build_model(detector_config()).eval()
    pixels = torch.rand(2, 1, 32, 32) * 2 - 1
    logits, boxes = model(pixels)
    perm = torch.tensor([3, 0, 4, 1, 2])
    with torch.no_grad():
        model.queries.weight.copy_(model.queries.weight[perm])
    logits2, boxes2 = model(pixels)
    torch.testing.assert_close(logits2, logits[:, perm], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(boxes2, boxes[:, perm], atol=1e-5, rtol=1e-5)


QUERY_KINDS = [
    {},
    dict(queries="anchors", refine_boxes=True),
    dict(queries="dense", dense_aux=True),
    dict(queries="dense", dense_aux=True, refine_boxes=True),
]


@pytest.mark.parametrize("kind", QUERY_KINDS)
def test_an_image_is_detected_alike_alone_and_in_a_batch(kind):
    torch.manual_seed(3)
    model = build_model(detector_config(**kind)).eval()
    pixels = torch.rand(4, 1, 32, 32) * 2 - 1
    logits, boxes = model(pixels)
    alone, alone_boxes = model(pixels[2:3])
    torch.testing.assert_close(alone, logits[2:3], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(alone_boxes, boxes[2:3], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", QUERY_KINDS)
def test_cross_attention_weights_cover_the_feature_map(kind):
    torch.manual_seed(4)
    model = build_model(detector_config(**kind)).eval()
    pixels = torch.rand(1, 1, 32, 32) * 2 - 1
    logits, boxes, weights = model.attention(pixels)
    assert len(weights) == 2 and weights[0].shape == (1, 4, 5, 16)
    torch.testing.assert_close(weights[-1].sum(-1), torch.ones(1, 4, 5))
    torch.testing.assert_close(logits, model(pixels)[0])
    torch.testing.assert_close(boxes, model(pixels)[1])


def test_wrong_images_get_one_clear_error():
    model = build_model(detector_config())
    with pytest.raises(ValueError, match=r"\(B, 1, 32, 32\)"):
        model(torch.rand(2, 3, 32, 32))
    with pytest.raises(ValueError, match="pass floats"):
        model(torch.zeros(2, 1, 32, 32, dtype=torch.uint8))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (dict(arch="encoder"), "arch='encoder-decoder'"),
        (dict(detection=dict(image_size=30, stride=8)), "not divisible by stride"),
        (dict(detection=dict(image_size=36, stride=6)), "power of 2"),
        (dict(d_model=30, n_heads=3), "divisible by 4"),
        (dict(positional="rope"), 'positional = "none"'),
        (dict(detection=dict(queries="dense")), "dense_aux = true"),
        (
            dict(detection=dict(image_size=32, queries="dense", dense_aux=True, n_queries=17)),
            "at most 16",
        ),
        (dict(detection=dict(refine_boxes=True)), "needs reference boxes"),
    ],
)
def test_config_rules(change, message):
    values = detector_config().to_dict()
    values.update(change)
    with pytest.raises(ConfigError, match=message):
        ModelConfig.from_dict(values)


def test_flops_count_the_backbone_convolutions():
    """The cnn backbone's multiply-adds by hand: 32 -> 16 -> 8 -> 4 pixels, 8, 16, 32 channels."""
    cfg = detector_config()
    flops = flops_per_image(cfg)
    by_hand = 0
    for c_in, c_out, side in ((1, 8, 16), (8, 16, 8), (16, 32, 4)):
        by_hand += 2 * 9 * c_in * c_out * side**2 + 2 * 9 * c_out * c_out * side**2
    by_hand += 2 * 32 * 32 * 16  # the 1 x 1 projection to d_model
    assert flops["backbone"] == by_hand
    assert flops["forward"] == sum(flops[k] for k in ("backbone", "encoder", "decoder", "head"))
    assert flops["training"] == 3 * flops["forward"]


def test_dense_head_shapes_and_forward_unchanged_by_it():
    """dense_aux builds Co-DETR's head on the memory: a heatmap (B, n_classes, grid, grid) and a
    box per cell (B, grid, grid, 4) inside the image's cells; without dense=True the predictions
    are those of the same weights without the head."""
    torch.manual_seed(5)
    model = build_model(detector_config(dense_aux=True)).eval()
    pixels = torch.rand(2, 1, 32, 32) * 2 - 1
    logits, boxes, (heat, cell_boxes) = model(pixels, all_layers=True, dense=True)
    assert logits.shape == (2, 2, 5, 4) and boxes.shape == (2, 2, 5, 4)
    assert heat.shape == (2, 3, 4, 4) and cell_boxes.shape == (2, 4, 4, 4)
    torch.testing.assert_close(heat.sigmoid().mean(), torch.tensor(0.1), atol=0.05, rtol=0)
    column = (cell_boxes[..., 0] * 4).floor()  # (B, grid, grid): each cell's box is centred in it
    assert torch.equal(column, torch.arange(4.0).expand(2, 4, 4))
    assert torch.equal((cell_boxes[..., 1] * 4).floor(), column.transpose(1, 2))
    plain = build_model(detector_config()).eval()
    missing, unexpected = plain.load_state_dict(model.state_dict(), strict=False)
    assert not missing and unexpected and all(k.startswith("dense_head.") for k in unexpected)
    alone, alone_boxes = plain(pixels)
    torch.testing.assert_close(model(pixels)[0], alone)
    torch.testing.assert_close(model(pixels)[1], alone_boxes)
    torch.testing.assert_close(model.detect(pixels)[0], plain.detect(pixels)[0])
    with pytest.raises(ValueError, match="dense_aux = true"):
        plain(pixels, dense=True)


def test_dense_weight_must_not_be_negative():
    values = detector_config().to_dict()
    values["detection"] = {**values["detection"], "dense_aux": True, "dense_weight": -1.0}
    with pytest.raises(ConfigError, match="dense_weight"):
        ModelConfig.from_dict(values)


def test_point_sinusoids_at_a_cell_centre_are_that_cells_positions():
    from transformer.model.detection import point_sinusoids

    table = sinusoidal_2d(12, 64)[1:]  # (144, 64), row-major
    for row, col in ((0, 0), (3, 7), (11, 5)):
        point = torch.tensor([(col + 0.5) / 12, (row + 0.5) / 12])
        torch.testing.assert_close(point_sinusoids(point, 12, 64), table[row * 12 + col])


def test_anchor_queries_predict_boxes_relative_to_their_anchors():
    """queries = "anchors": each query's position is the sinusoid of its anchor's centre, and a box
    head that outputs zeros gives back the anchor boxes themselves."""
    from transformer.model.detection import point_sinusoids

    torch.manual_seed(5)
    model = build_model(detector_config(queries="anchors")).eval()
    assert model.queries is None and model.anchors.shape == (5, 4)
    centres = model.anchors[:, :2].sigmoid()
    start, positions, ref = model.start_queries(torch.zeros(2, 16, 32))
    torch.testing.assert_close(positions, point_sinusoids(centres, 4, 32).expand(2, -1, -1))
    assert not start.any() and torch.equal(ref, model.anchors.detach().expand(2, -1, -1))
    with torch.no_grad():
        last = model.box_head.layers[-1]
        last.weight.zero_()
        last.bias.zero_()
    _, boxes = model(torch.rand(2, 1, 32, 32) * 2 - 1)
    torch.testing.assert_close(boxes, model.anchors.sigmoid().expand(2, -1, -1))


def test_top_cells_ranks_local_peaks_before_their_neighbours():
    """A large object's plateau of high cells gives one query (its peak); the next query goes to a
    weaker object's peak elsewhere, not to the strong object's second-best cell."""
    from transformer.model.detection import top_cells

    heat = torch.full((1, 2, 6, 6), -5.0)
    heat[0, 0, 0:3, 0:3] = 2.0  # a wide object of class 0 ...
    heat[0, 0, 1, 1] = 3.0  # ... peaked at (row 1, column 1)
    heat[0, 1, 4, 4] = 0.5  # a weak object of class 1 at (4, 4)
    heat[0, 0, 5, 0] = -1.0  # a faint blip at (5, 0): also a local peak
    assert top_cells(heat, 3).tolist() == [[1 * 6 + 1, 4 * 6 + 4, 5 * 6 + 0]]
    heat[0, 0, 1, 1] = 2.0  # the top-left object now a flat plateau: each cell of it a peak
    heat[0, 1, 1, 4] = 2.5  # beside a peak above it, not beside the plateau
    first, second = top_cells(heat, 2)[0].tolist()
    assert first == 1 * 6 + 4 and second in {r * 6 + c for r in range(3) for c in range(3)}


def test_dense_queries_start_from_the_dense_heads_best_cells():
    """queries = "dense": each query starts from its chosen cell's memory (projected), sits at
    the sinusoid of that cell's box centre, and with a box head that outputs zeros predicts that
    very box at every layer."""
    from transformer.model.detection import point_sinusoids, top_cells

    torch.manual_seed(6)
    model = build_model(detector_config(queries="dense", dense_aux=True)).eval()
    assert model.queries is None and model.anchors is None
    pixels = torch.rand(2, 1, 32, 32) * 2 - 1
    with torch.no_grad():
        last = model.box_head.layers[-1]
        last.weight.zero_()
        last.bias.zero_()
        memory = model.encode(pixels)
        heat, cell_boxes = model.dense_head(memory)
        cells = top_cells(heat, 5)  # (2, 5)
        chosen = torch.stack([cell_boxes[b].flatten(0, 1)[cells[b]] for b in range(2)])
        start, positions, ref = model.start_queries(memory, (heat, cell_boxes))
        by_hand = torch.stack([model.query_content(memory[b, cells[b]]) for b in range(2)])
        torch.testing.assert_close(start, by_hand)
        torch.testing.assert_close(positions, point_sinusoids(chosen[..., :2], 4, 32))
        torch.testing.assert_close(ref.sigmoid(), chosen, atol=1e-6, rtol=1e-5)
        _, boxes = model(pixels, all_layers=True)
    torch.testing.assert_close(boxes, chosen.expand(2, -1, -1, -1), atol=1e-6, rtol=1e-5)


def test_refined_boxes_match_a_layer_by_layer_computation():
    """refine_boxes: layer l's box is sigmoid(box_head(h_l) + logit(box_{l-1})), and layer l's
    queries sit at box_{l-1}'s centre; written out layer by layer from the plain layers."""
    from transformer.model.detection import _decoder_layer, point_sinusoids

    torch.manual_seed(7)
    cfg = detector_config(queries="dense", dense_aux=True, refine_boxes=True)
    model = build_model(cfg.replace(n_decoder_layers=3)).eval()
    pixels = torch.rand(2, 1, 32, 32) * 2 - 1
    with torch.no_grad():
        memory = model.encode(pixels)
        dense_out = model.dense_head(memory)
        x, pos, ref = model.start_queries(memory, dense_out)
        keys = memory + model.positions
        expected = []
        for layer in model.decoder_layers:
            x, _ = _decoder_layer(layer, x, pos, memory, keys, False)
            h = model.decoder_norm(x)
            box = (_box_head_raw(model.box_head, h) + ref).sigmoid()
            expected.append(box)
            ref = torch.logit(box.clamp(1e-4, 1 - 1e-4))
            pos = point_sinusoids(box[..., :2], 4, 32)
        _, boxes = model(pixels, all_layers=True)
    torch.testing.assert_close(boxes, torch.stack(expected), atol=1e-5, rtol=1e-5)
    plain = build_model(
        cfg.replace(
            n_decoder_layers=3, detection={**cfg.to_dict()["detection"], "refine_boxes": False}
        )
    )
    plain.load_state_dict(model.state_dict())
    with torch.no_grad():
        _, unrefined = plain.eval()(pixels, all_layers=True)
    torch.testing.assert_close(unrefined[0], boxes[0])  # the first layer is the same
    assert not torch.allclose(unrefined[-1], boxes[-1])


def _box_head_raw(head, hidden):
    """BoxHead's perceptron before its sigmoid."""
    for i, layer in enumerate(head.layers):
        hidden = layer(hidden) if i == len(head.layers) - 1 else torch.relu(layer(hidden))
    return hidden


def test_flops_of_dense_queries_count_the_dense_head_in_inference():
    """Co-DETR's head is training-only work for learned queries, inference work for dense ones
    (with the queries' start projection)."""
    c, cells, queries = 32, 16, 5
    dense_head = cells * (2 * 2 * 9 * c * c + 2 * c * (3 + 4))  # 3 classes, 4 box numbers
    plain = flops_per_image(detector_config(dense_aux=True))
    dense = flops_per_image(detector_config(queries="dense", dense_aux=True))
    assert dense["head"] - plain["head"] == dense_head + queries * 2 * c * c
    assert plain["training"] == 3 * (plain["forward"] + dense_head)
    assert dense["training"] == 3 * dense["forward"]


def test_ranked_pairs_are_the_most_probable_query_class_pairs():
    """Against sorting every (query, class) pair by its softmax probability, no object left out."""
    from transformer.model.detection import class_probabilities, ranked_pairs

    torch.manual_seed(8)
    logits, boxes = torch.randn(3, 5, 4) * 3, torch.rand(3, 5, 4)
    scores, labels, chosen = ranked_pairs(class_probabilities(logits, "softmax"), boxes, 7)
    probs = logits.softmax(-1)
    for b in range(3):
        pairs = sorted(
            ((float(probs[b, q, c]), q, c) for q in range(5) for c in range(3)), reverse=True
        )[:7]
        torch.testing.assert_close(scores[b], torch.tensor([p for p, _, _ in pairs]))
        assert labels[b].tolist() == [c for _, _, c in pairs]
        assert torch.equal(chosen[b], boxes[b, [q for _, q, _ in pairs]])
    assert ranked_pairs(class_probabilities(logits, "softmax"), boxes, 100)[0].shape == (3, 15)  # at most Q * n_classes
    torch.testing.assert_close(class_probabilities(logits, "focal"), logits.sigmoid())  # no "no object"


def test_a_focal_detector_scores_each_class_by_its_sigmoid():
    """class_loss = "focal": no "no object" output (n_classes logits), each class's probability
    its sigmoid, in detect and in the ranked pairs; the head's FLOPs one output fewer a query."""
    from transformer.model.detection import ranked_pairs

    torch.manual_seed(0)
    model = build_model(detector_config(class_loss="focal")).eval()
    pixels = torch.rand(3, 1, 32, 32) * 2 - 1
    logits, boxes = model(pixels)
    assert logits.shape == (3, 5, 3)
    scores, labels, _ = model.detect(pixels)
    torch.testing.assert_close(scores, logits.sigmoid().max(-1).values)
    assert torch.equal(labels, logits.argmax(-1))
    pairs = model.detect(pixels, pairs=4)
    expect = ranked_pairs(logits.sigmoid(), boxes, 4)
    for got, want in zip(pairs, expect, strict=True):
        torch.testing.assert_close(got, want)
    softmax = flops_per_image(detector_config())["head"]
    assert softmax - flops_per_image(detector_config(class_loss="focal"))["head"] == 5 * 2 * 32
