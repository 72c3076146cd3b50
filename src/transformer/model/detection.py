"""Object detection as set prediction (DETR, Carion et al. 2020): a backbone turns the image into a
feature map, the encoder layers read it, and the decoder layers turn Q learned object queries into
Q predictions at once, each a class (or "no object") and a box. Training matches predictions to
objects one to one (transformer.training.objectives.detection.set_loss); no anchors, no
non-maximum suppression.

Legend (model/__init__.py): B batch, P feature-map positions (grid * grid, row-major), Q object
queries, C d_model, H heads; spelled out: channels, size (image side), stride (pixels per position
along a side), n_classes (object classes; index n_classes is "no object"), n_layers (decoder
layers).

The rules DETR keeps, kept here:
- Positions are fixed 2-D sinusoids (model.patches.sinusoidal_2d: half the dimensions the row, half
  the column) added to the queries and keys of every encoder attention and to the keys of the
  decoder's cross-attention, never to the values: the content flows without them (§3.1 of the
  paper, its "positional encodings at every attention layer").
- The object queries are learned position embeddings for the decoder: added to its queries and
  keys in every layer, while the decoder's state starts at zero. The decoder has no causal mask:
  every query sees every other.
- The encoder and decoder layers are the project's EncoderLayer and DecoderLayer (same parameters,
  post- or pre-norm), run with the positions added as above. The decoder's output is normed (one
  shared norm) at every layer, so each layer's output can be decoded for the auxiliary losses.
- Boxes are (cx, cy, w, h) relative to the image side, through a sigmoid; classes are logits over
  n_classes + 1 ("no object" last), or over n_classes with class_loss focal (a sigmoid each).
- With model.detection.dense_aux, a DenseHead on the memory (Co-DETR's auxiliary one-to-many head,
  Zong et al. 2023) answers at every feature-map position during training (forward's dense=True,
  training.objectives.detection.dense_loss). Inference runs it only for dense queries.
- Queries (model.detection.queries): learned (the paper's); anchors (a learned reference box per
  query); dense, two-stage (Deformable DETR, RT-DETR): per image, the dense head's n_queries best
  cells (top_cells: each cell's best class logit, local 3 x 3 peaks ranked before the rest), each
  query starting from its cell's memory through a linear map and a norm, its reference box the
  box that cell predicts (detached: the dense loss alone trains it). With reference boxes, a
  query's position is the sinusoid of its box's centre and its box is the box head's output added
  to the reference in logits (inverse sigmoid) before the sigmoid; with refine_boxes the reference
  of each layer is the previous layer's box, detached (Deformable DETR's iterative refinement).
- Denoising queries (model.detection.denoise_groups; training only): noised copies of the image's
  objects appended after the matching queries, each starting from its label's embedding
  (denoise_labels) at its noised box as a reference box, kept apart by an attention mask among the
  queries (transformer.model.denoise, DN-DETR / DINO).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .denoise import DenoiseQueries, denoise_mask
from .detection_parts import BoxHead, ConvBackbone, DenseHead, PatchBackbone
from .layers import DecoderLayer, EncoderLayer, dropped, residual
from .patches import check_pixels, sinusoidal_2d


def point_sinusoids(points: torch.Tensor, grid: int, d_model: int) -> torch.Tensor:
    """(..., 2) relative (cx, cy) -> (..., C): the feature map's 2-D sinusoids (sinusoidal_2d) at
    continuous positions, the row cy * grid - 1/2 in the first C/2 dimensions and the column
    cx * grid - 1/2 in the last, so that a point at the centre of cell (r, c) gets that cell's
    position vector exactly."""
    half = d_model // 2
    inv_freq = torch.exp(
        torch.arange(0, half, 2, dtype=torch.float32, device=points.device)
        * (-math.log(10000.0) / half)
    )

    def encode(p: torch.Tensor) -> torch.Tensor:
        angles = (p.float() * grid - 0.5).unsqueeze(-1) * inv_freq  # (..., C/4)
        return torch.stack([angles.sin(), angles.cos()], -1).flatten(-2)  # interleaved sin, cos

    return torch.cat([encode(points[..., 1]), encode(points[..., 0])], -1)


def box_logits(boxes: torch.Tensor) -> torch.Tensor:
    """(..., 4) boxes in [0, 1] -> their inverse sigmoid in float32, clamped to +-9.2 (1e-4 from
    the ends): reference boxes for BoxHead."""
    return torch.logit(boxes.float().clamp(1e-4, 1 - 1e-4))


@torch.no_grad()
def top_cells(heat_logits: torch.Tensor, k: int) -> torch.Tensor:
    """(B, n_classes, grid, grid) heatmap logits -> (B, k) row-major cell indices: the k cells of
    highest best-class logit, the cells that are the maximum of their 3 x 3 neighbourhood (a
    CenterNet peak) all ranked before the others, so that one large object does not take every
    query."""
    score = heat_logits.float().amax(1)  # (B, grid, grid)
    peak = score == F.max_pool2d(score.unsqueeze(1), 3, stride=1, padding=1).squeeze(1)
    span = score.amax() - score.amin() + 1.0  # lifts every peak above every other cell
    ranked = torch.where(peak, score + span, score)
    return ranked.flatten(1).topk(k, dim=1).indices


COCO_DETECTIONS = 100
"""COCO's maxDets: the detections per image its metrics rank; evaluation ranks this many (query,
class) pairs per image (ranked_pairs)."""


def class_probabilities(logits: torch.Tensor, class_loss: str) -> torch.Tensor:
    """Class logits (..., n_classes + 1) of a softmax detector or (..., n_classes) of a focal one
    (model.detection.class_loss) -> each object class's probability (..., n_classes), float32:
    the softmax without "no object", or a sigmoid per class."""
    if class_loss == "focal":
        return logits.float().sigmoid()
    return logits.float().softmax(-1)[..., :-1]


def ranked_pairs(
    probs: torch.Tensor, boxes: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Class probabilities (B, Q, n_classes) (class_probabilities) and boxes (B, Q, 4) -> the k
    most probable (query, class) pairs of each image: scores (B, k), labels (B, k) and boxes
    (B, k, 4), most probable first. A query unsure between two classes answers as both, each with
    its probability, as Deformable DETR's evaluation ranks its top 100 (query, class) pairs.
    k is capped at Q * n_classes."""
    n_classes = probs.shape[-1]
    scores, flat = probs.flatten(1).topk(min(k, probs.shape[1] * n_classes), dim=1)  # (B, k)
    query = flat // n_classes  # (B, k)
    return scores, flat % n_classes, boxes.gather(1, query[..., None].expand(-1, -1, 4))


class DetectionTransformer(nn.Module):
    """DETR: backbone -> encoder layers over the feature map -> decoder layers over the object
    queries -> class logits and boxes for every query."""

    def __init__(
        self,
        config,
        backbone: ConvBackbone | PatchBackbone,
        encoder_layers: list[EncoderLayer],
        encoder_norm: nn.Module | None,
        decoder_layers: list[DecoderLayer],
        decoder_norm: nn.Module,
        dropout: float,
        dense_head: DenseHead | None = None,
    ):
        super().__init__()
        d = config.detection
        self.config = config
        self.backbone = backbone
        self.encoder_layers = nn.ModuleList(encoder_layers)
        self.encoder_norm = encoder_norm
        self.decoder_layers = nn.ModuleList(decoder_layers)
        self.decoder_norm = decoder_norm
        self.dense_head = dense_head  # Co-DETR's training-only head on the memory, or None
        self.queries = None
        self.anchors = None
        self.query_content = None
        if d.queries == "dense":  # two-stage: a query's start is its cell's memory, projected
            self.query_content = nn.Sequential(
                nn.Linear(config.d_model, config.d_model), nn.LayerNorm(config.d_model)
            )
        elif d.queries == "anchors":  # reference boxes: centres spread at random, sides 1/4
            boxes = torch.cat(
                [torch.rand(d.n_queries, 2) * 0.9 + 0.05, torch.full((d.n_queries, 2), 0.25)], -1
            )
            self.anchors = nn.Parameter(torch.logit(boxes))
        else:
            self.queries = nn.Embedding(d.n_queries, config.d_model)
        self.denoise_labels = None  # training's denoising queries start from their label's row
        if d.denoise_groups:
            self.denoise_labels = nn.Embedding(config.n_classes, config.d_model)
        outputs = config.n_classes + (d.class_loss == "softmax")  # "no object": softmax's only
        self.class_head = nn.Linear(config.d_model, outputs)
        self.box_head = BoxHead(config.d_model)
        self.dropout = nn.Dropout(dropout)
        table = sinusoidal_2d(d.grid, config.d_model)[1:]  # (P, C), no [CLS] row
        self.register_buffer("positions", table.unsqueeze(0), persistent=False)

    def start_queries(self, memory: torch.Tensor, dense_out=None):
        """memory (B, P, C) -> the decoder's start state (B, Q, C), the queries' positions
        (B, Q, C) and reference boxes in logits (B, Q, 4), or None for learned queries. dense_out
        is the dense head's (heatmap logits, cell boxes) on this memory, for dense queries."""
        d, b, c = self.config.detection, memory.shape[0], self.config.d_model
        if d.queries == "learned":
            pos = self.queries.weight.to(memory.dtype).unsqueeze(0).expand(b, -1, -1)
            return torch.zeros_like(pos), pos, None
        if d.queries == "anchors":
            ref = self.anchors.float().unsqueeze(0).expand(b, -1, -1)  # (B, Q, 4)
            pos = point_sinusoids(ref[..., :2].sigmoid(), d.grid, c).to(memory.dtype)
            return torch.zeros_like(pos), pos, ref
        heat_logits, cell_boxes = dense_out
        cells = top_cells(heat_logits, d.n_queries)  # (B, Q)
        chosen = cell_boxes.flatten(1, 2).gather(1, cells[..., None].expand(-1, -1, 4)).detach()
        start = self.query_content(memory.gather(1, cells[..., None].expand(-1, -1, c)))
        pos = point_sinusoids(chosen[..., :2], d.grid, c).to(memory.dtype)
        return start, pos, box_logits(chosen)

    def encode(self, pixels: torch.Tensor, need_weights: bool = False):
        """pixels (B, channels, size, size) -> memory (B, P, C); with need_weights also the
        self-attention weights (B, H, P, P) of each layer."""
        d = self.config.detection
        check_pixels(pixels, d.channels, d.image_size)
        x = dropped(self.dropout, self.backbone(pixels.to(self.positions.dtype)))  # (B, P, C)
        pos = self.positions.to(x.dtype)
        weights = []
        for layer in self.encoder_layers:
            x, w = _encoder_layer(layer, x, pos, need_weights)
            weights.append(w)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        return (x, weights) if need_weights else x

    def decode(
        self,
        memory: torch.Tensor,
        dense_out=None,
        need_weights: bool = False,
        denoise: DenoiseQueries | None = None,
    ):
        """memory (B, P, C) -> each decoder layer's normed output (n_layers, B, Q, C) and box
        (n_layers, B, Q, 4) as (cx, cy, w, h) in [0, 1]; with need_weights also the
        cross-attention weights (B, H, Q, P) of each layer. dense_out: as start_queries. With
        denoise (training), its D queries follow the Q matching ones: Q + D in place of Q."""
        d = self.config.detection
        x, query_pos, ref = self.start_queries(memory, dense_out)
        mask = None
        if denoise is not None:
            x, query_pos, ref, mask = self._with_denoise(x, query_pos, ref, denoise)
        keys = memory + self.positions.to(memory.dtype)  # (B, P, C): positions on the keys only
        outputs, boxes, weights = [], [], []
        for layer in self.decoder_layers:
            x, w = _decoder_layer(layer, x, query_pos, memory, keys, need_weights, mask)
            hidden = self.decoder_norm(x)
            box = self.box_head(hidden, ref)
            outputs.append(hidden)
            boxes.append(box)
            weights.append(w)
            if d.refine_boxes:  # the next layer starts from this layer's box
                ref = box_logits(box.detach())
                query_pos = point_sinusoids(box.detach()[..., :2], d.grid, self.config.d_model)
                query_pos = query_pos.to(memory.dtype)
        hidden, boxes = torch.stack(outputs), torch.stack(boxes)
        return (hidden, boxes, weights) if need_weights else (hidden, boxes)

    def _with_denoise(self, x, query_pos, ref, denoise: DenoiseQueries):
        """The matching queries' start (x, positions, reference boxes or None) with the
        denoising queries appended, and the queries' attention mask (model.denoise)."""
        if self.denoise_labels is None:
            raise ValueError(
                "this detector has no denoising queries: build it with "
                "model.detection.denoise_groups > 0 to pass denoise"
            )
        grid, c = self.config.detection.grid, self.config.d_model
        start = self.denoise_labels(denoise.labels).to(x.dtype)  # (B, D, C)
        pos = point_sinusoids(denoise.boxes[..., :2], grid, c).to(x.dtype)  # (B, D, C)
        if ref is None:  # learned queries: a zero offset in logits is the box head's own box
            ref = x.new_zeros(*x.shape[:2], 4, dtype=torch.float32)
        ref = torch.cat([ref, box_logits(denoise.boxes)], 1)  # (B, Q + D, 4)
        mask = denoise_mask(x.shape[1], denoise)  # (B, 1, Q + D, Q + D)
        return torch.cat([x, start], 1), torch.cat([query_pos, pos], 1), ref, mask

    def forward(
        self,
        pixels: torch.Tensor,
        all_layers: bool = False,
        dense: bool = False,
        denoise: DenoiseQueries | None = None,
    ):
        """pixels (B, channels, size, size) -> class logits (B, Q, n_classes + 1) and boxes
        (B, Q, 4) as (cx, cy, w, h) in [0, 1] of the last decoder layer; with all_layers, every
        layer's: (n_layers, B, Q, n_classes + 1) and (n_layers, B, Q, 4), the last layer last.
        With dense (training, model.detection.dense_aux), a third item: the dense head's heatmap
        logits (B, n_classes, grid, grid) and boxes (B, grid, grid, 4) on the memory. With
        denoise (training, model.detection.denoise_groups), a last item: the denoising queries'
        logits (n_layers, B, D, n_classes + 1) and boxes (n_layers, B, D, 4), every layer's."""
        if dense and self.dense_head is None:
            raise ValueError(
                "this detector has no dense head: build it with model.detection.dense_aux = true "
                "to ask for dense=True"
            )
        memory = self.encode(pixels)
        dense_out = None
        if dense or self.config.detection.queries == "dense":
            dense_out = self.dense_head(memory)
        hidden, boxes = self.decode(memory, dense_out, denoise=denoise)
        denoised = None
        if denoise is not None:
            q = hidden.shape[2] - denoise.labels.shape[1]
            denoised = (self.class_head(hidden[:, :, q:]), boxes[:, :, q:])
            hidden, boxes = hidden[:, :, :q], boxes[:, :, :q]
        if not all_layers:
            hidden, boxes = hidden[-1], boxes[-1]
        out = (self.class_head(hidden), boxes) + ((dense_out,) if dense else ())
        return out + ((denoised,) if denoise is not None else ())

    def detect(
        self, pixels: torch.Tensor, pairs: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """pixels -> each query's object: score (B, Q) (the probability of its most likely object
        class), label (B, Q) and box (B, Q, 4) as (cx, cy, w, h) in [0, 1]. All Q are returned,
        most with low scores ("no object"): a threshold or COCO's ranking picks among them.
        With pairs = k: the k most probable (query, class) pairs instead (ranked_pairs), (B, k)."""
        logits, boxes = self(pixels)
        probs = class_probabilities(logits, self.config.detection.class_loss)  # (B, Q, K)
        if pairs is not None:
            return ranked_pairs(probs, boxes, pairs)
        scores, labels = probs.max(-1)
        return scores, labels, boxes

    def attention(self, pixels: torch.Tensor):
        """The last layer's predictions and every decoder layer's cross-attention weights:
        (logits (B, Q, n_classes + 1), boxes (B, Q, 4), [(B, H, Q, P)] * n_layers); the weights
        of query q over position p say where in the image q looked (the paper's Figure 6)."""
        memory = self.encode(pixels)
        dense_out = self.dense_head(memory) if self.config.detection.queries == "dense" else None
        hidden, boxes, weights = self.decode(memory, dense_out, need_weights=True)
        return self.class_head(hidden[-1]), boxes[-1], weights


def _encoder_layer(
    layer: EncoderLayer, x: torch.Tensor, pos: torch.Tensor, need_weights: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One encoder layer with the positions added to its queries and keys, not its values."""

    def attend(h):
        attn = layer.self_attn
        k, v = attn.project_kv(h + pos, values=h)
        return attn.attend(h + pos, k, v, need_weights=need_weights)

    x, weights = residual(x, layer.norm1, layer.dropout, layer.pre_norm, attend)
    x, _ = residual(
        x, layer.norm2, layer.dropout, layer.pre_norm, lambda h: (layer.feed_forward(h), None)
    )
    return x, weights


def _decoder_layer(
    layer: DecoderLayer,
    x: torch.Tensor,
    query_pos: torch.Tensor,
    memory: torch.Tensor,
    keys: torch.Tensor,
    need_weights: bool,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One decoder layer: self-attention among the queries (query positions on queries and keys),
    cross-attention from the queries (with their positions) over the memory (keys = memory +
    positions, values = memory), the feed-forward network. Nothing is causal here; mask (B, 1, T,
    T) keeps denoising queries apart (model.denoise)."""

    def self_attend(h):
        attn = layer.self_attn
        k, v = attn.project_kv(h + query_pos, values=h)
        return attn.attend(h + query_pos, k, v, mask)

    def cross_attend(h):
        attn = layer.cross_attn
        k, v = attn.project_kv(keys, values=memory)
        return attn.attend(h + query_pos, k, v, need_weights=need_weights)

    x, _ = residual(x, layer.norm1, layer.dropout, layer.pre_norm, self_attend)
    x, weights = residual(x, layer.norm2, layer.dropout, layer.pre_norm, cross_attend)
    x, _ = residual(
        x, layer.norm3, layer.dropout, layer.pre_norm, lambda h: (layer.feed_forward(h), None)
    )
    return x, weights
