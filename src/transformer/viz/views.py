"""The figures `transformer attention` draws, one for each kind of model a task runs: where a
text's output looked (translation, language models), an image encoder's [CLS] attention and its
rollout, a caption's tokens over the image, a detector's object queries, a transcript over the
audio. Each reads its one input (a text, an image file or a WAV file), writes the figure and
returns the lines the command prints; the task names its figure in its Task record (tasks/), so
nothing here asks what kind of model it was given. `pipeline` is a decoding.pipeline.Pipeline,
handed in: viz does not import it, since Pipeline reads the table of tasks that names these
figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class View:
    """What one figure shows: its file, the layer and head (a number, "mean" or "all"), the kind
    of attention of a text model, the beam that makes the output, a detector's threshold."""

    out: str
    layer: int = -1
    head: int | str = "mean"
    kind: str | None = None
    beam_size: int | None = None
    threshold: float | None = None


def text_view(pipeline, text: str, view: View) -> list[str]:
    """One layer's attention while decoding `text` (a translation, or a language model's
    continuation of a prompt), as a heatmap."""
    from .attention import attention_map, plot_attention

    m = attention_map(
        pipeline, text, layer=view.layer, kind=view.kind, head=view.head, beam_size=view.beam_size
    )
    plot_attention(m.weights, m.columns, m.rows, view.out, title=m.title)
    lines = [f"wrote {view.out}: {m.title}"]
    return lines + ([f"output: {m.output_text}"] if m.kind != "encoder" else [])


def image_view(pipeline, image_file: str, view: View) -> list[str]:
    """An image encoder's [CLS] attention per head of one layer, and the rollout over all
    layers."""
    import torch

    from ..data.image_tensors import to_pixels
    from ..data.images import read_image
    from .image_attention import image_attention, plot_image_attention

    v = pipeline.model.config.vision
    mode = "L" if v.channels == 1 else "RGB"
    image = torch.from_numpy(read_image(image_file, mode, v.image_size))
    device = next(pipeline.model.parameters()).device
    maps = image_attention(
        pipeline.model, to_pixels(image[None]).to(device), view.layer, pipeline.labels
    )
    guess = ", ".join(f"{label} {p:.1%}" for label, p in maps.probabilities)
    layers = f"layer {maps.layer} of 0-{maps.n_layers - 1}"
    title = f"{Path(image_file).name}: [CLS] attention, {layers}, and rollout" + (
        f"\nmodel: {guess}" if guess else ""
    )
    plot_image_attention(image, maps, view.out, title=title)
    return [
        f"wrote {view.out}: [CLS] attention per head, {layers}, and the rollout over all layers"
        + (f"; model: {guess}" if guess else "")
    ]


def detection_view(pipeline, image_file: str, view: View) -> list[str]:
    """A detector's objects and where each one's query looked, in one decoder layer."""
    import torch

    from ..data.image_tensors import to_pixels
    from ..data.images import read_image_resized
    from .detection_attention import MAX_PANELS, detection_attention, plot_detection_attention

    d = pipeline.model.config.detection
    array, _ = read_image_resized(image_file, "L" if d.channels == 1 else "RGB", d.image_size)
    image = torch.from_numpy(array)
    device = next(pipeline.model.parameters()).device
    threshold = pipeline.settings(
        **({} if view.threshold is None else {"threshold": view.threshold})
    ).threshold
    result = detection_attention(
        pipeline.model, to_pixels(image[None]).to(device), pipeline.labels, threshold, view.layer
    )
    layers = f"layer {result.layer} of 0-{result.n_layers - 1}"
    what = f"cross-attention of each object's query, {layers}, mean of {result.n_heads} heads"
    plot_detection_attention(
        result, image, view.out, title=f"{Path(image_file).name}: {what}", labels=pipeline.labels
    )
    n = len(result.objects)
    found = (
        f"{n} object(s) at or above {threshold:g}"
        + (f", the {MAX_PANELS} most likely drawn" if n > MAX_PANELS else "")
        if n
        else f"no object at or above {threshold:g} (the best scored {result.best:.2f})"
    )
    return [f"wrote {view.out}: {what}; {found}"]


def audio_view(pipeline, wav_file: str, view: View) -> list[str]:
    """A speech model's cross-attention over the spectrogram of one WAV file."""
    from ..data.audio import read_wav
    from .audio_attention import audio_attention, plot_audio_attention

    m = audio_attention(pipeline, read_wav(wav_file), view.layer, view.head, view.beam_size)
    heads = {"mean": f"mean of {m.n_heads} heads", "all": f"{m.n_heads} heads"}.get(
        m.head, f"head {m.head}"
    )
    what = f"cross-attention, layer {m.layer} of 0-{m.n_layers - 1}, {heads}"
    plot_audio_attention(m, view.out, title=f"{Path(wav_file).name}: {what}")
    return [f"wrote {view.out}: {what}", f"output: {m.text}"]


def caption_view(pipeline, image_file: str, view: View) -> list[str]:
    """A captioner's caption and, per token, the cross-attention of one decoder layer over the
    image."""
    import torch

    from ..data.images import read_image_resized
    from .caption_attention import caption_attention, plot_caption_attention

    v = pipeline.model.config.vision
    array, _ = read_image_resized(image_file, "L" if v.channels == 1 else "RGB", v.image_size)
    m = caption_attention(pipeline, torch.from_numpy(array), view.layer, view.head, view.beam_size)
    heads = f"mean of {m.n_heads} heads" if m.head == "mean" else f"head {m.head}"
    what = f"cross-attention per caption token, layer {m.layer} of 0-{m.n_layers - 1}, {heads}"
    plot_caption_attention(m, view.out, title=f"{Path(image_file).name}: {m.text!r}\n{what}")
    return [f"wrote {view.out}: {what}", f"caption: {m.text}"]
