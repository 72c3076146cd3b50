"""Images from a decoder over pixel tokens (Image GPT): sampling, and the likelihood of images.

Sampling starts from each image's condition (transformer.data.pixels: a label token, a name and
<s>, or <s> alone) and draws exactly H * W pixel tokens over the KV cache, one position a step;
every id that is not a pixel (the special, label and character tokens) is suppressed, so an image
always comes out whole. Temperature, top-k and top-p apply as in text sampling (sampling.draw;
temperature 0 takes the most probable level at each pixel).

Classifier-free guidance (Ho & Salimans 2022; for autoregressive models as in Make-A-Scene and
Parti, and Hugging Face's guidance_scale): with a guidance scale s != 1 every image is also run from
the plain start <s> beside its condition, over the same cache, and each pixel is drawn from
    log p_uncond + s * (log p_cond - log p_uncond)
(the log-probabilities of the conditioned and the plain row; then temperature, top-k and top-p as
usual). s = 1 is the conditioned model itself, s = 0 the unconditional one, s > 1 pushes samples
towards what sets the condition apart. It needs a model trained with data.drop_condition > 0, which
has learned the plain start.

Scoring runs each image's condition and pixels through the model once (teacher forcing) and sums
the log-probabilities of the pixel tokens over the full vocabulary: the model's likelihood of the
quantised image, whose bits per dimension the caller reports.
"""

from __future__ import annotations

import torch

from ..data.pixels import PAD, START, ImageTokens, sequences
from .search.draw import draw
from .search.step import Stepper, inference


def check_length(model: torch.nn.Module, tokens: ImageTokens, prefixes: list[list[int]]) -> None:
    """Condition + pixels must fit the model's positions."""
    longest = max(len(p) for p in prefixes) + tokens.n_pixels - 1
    limit = model.config.max_positions
    if model.config.positional in ("learned", "sinusoidal") and longest > limit:
        raise ValueError(
            f"a condition of {longest - tokens.n_pixels + 1} tokens and {tokens.n_pixels} pixels "
            f"need {longest} positions; the model has max_positions={limit}: shorten the text"
        )


def guide(log_probs: torch.Tensor, scale: float) -> torch.Tensor:
    """Classifier-free guidance: (2N, V) log-probabilities, the N conditioned rows then the N plain
    ones -> (N, V) log p_uncond + scale * (log p_cond - log p_uncond); a token either row rules
    out (a suppressed id) stays ruled out."""
    cond, uncond = log_probs.float().chunk(2)
    allowed = torch.isfinite(cond) & torch.isfinite(uncond)
    mixed = uncond + scale * (cond - uncond)
    return mixed.masked_fill(~allowed, -float("inf"))


def sample_images(
    model: torch.nn.Module,
    tokens: ImageTokens,
    prefixes: list[list[int]],
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
    guidance_scale: float = 1.0,
) -> torch.Tensor:
    """One image per condition: uint8 (N, channels, H, W). guidance_scale != 1: classifier-free
    guidance towards each condition (see the module doc)."""
    check_length(model, tokens, prefixes)
    guided = guidance_scale != 1.0
    rows = prefixes + [[START]] * len(prefixes) if guided else prefixes
    chosen = []
    with inference(model):
        stepper = Stepper(model, rows, suppress=tokens.non_pixel_ids())
        log_probs = stepper.start()  # (N, V), or (2N, V) guided
        for i in range(tokens.n_pixels):
            if guided:
                log_probs = guide(log_probs, guidance_scale)
            pixel = draw(log_probs, temperature, top_k, top_p, generator)  # (N,)
            chosen.append(pixel)
            if i + 1 < tokens.n_pixels:
                log_probs = stepper.step(torch.cat([pixel, pixel]) if guided else pixel)
    return tokens.pixels(torch.stack(chosen, dim=1).cpu())  # (N, H * W) -> (N, C, H, W)


def image_log_likelihoods(
    model: torch.nn.Module,
    tokens: ImageTokens,
    images: torch.Tensor,
    prefixes: list[list[int]],
    batch_size: int = 32,
) -> torch.Tensor:
    """Summed log-probability (nats) of each image's pixel tokens given its condition: (N,)."""
    check_length(model, tokens, prefixes)
    device = next(model.parameters()).device
    out = []
    with inference(model):
        for start in range(0, len(images), batch_size):
            rows = slice(start, start + batch_size)
            inputs, targets = sequences(tokens, images[rows], prefixes[rows])
            inputs, targets = inputs.to(device), targets.to(device)
            logits = model(inputs)  # (B, L, V); right padding: causal attention never reaches it
            log_probs = torch.log_softmax(logits.float(), dim=-1)
            picked = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, L)
            out.append((picked * (targets != PAD)).sum(-1).cpu())
    return torch.cat(out)


def generate_images(
    pipeline, n: int, label: str | None, text: str | None, seed: int | None, **decode
) -> torch.Tensor:
    """What Pipeline.generate_images does: n images (n, channels, H, W) uint8 of a class, of a name
    or unconditional, under the model's decode settings with `decode` overrides."""
    from ..data.pixels import PixelTokenError
    from ..model.transformer import DecoderOnly
    from .inputs import PipelineError

    if pipeline.pixels is None:
        raise PipelineError(
            "this model does not generate images: use generate for text"
            if isinstance(pipeline.model, DecoderOnly)
            else "this model does not generate images: it needs a decoder trained on pixels"
        )
    if n < 1:
        raise PipelineError(f"n={n}: ask for at least one image")
    s = pipeline.settings(**decode)
    try:
        prefix = pipeline.pixels.prefix(label=label, name=text)
    except PixelTokenError as e:
        raise PipelineError(str(e)) from None
    guidance = s.guidance_scale
    if label is None and text is None:  # nothing to guide towards: decode.json's scale is moot
        if decode.get("guidance_scale", 1.0) != 1.0:
            raise PipelineError(
                f"guidance_scale={guidance:g} guides towards a label or text: give one, or "
                "leave guidance_scale at 1"
            )
        guidance = 1.0
    generator = torch.Generator(device=next(pipeline.model.parameters()).device)
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(seed)
    try:
        return sample_images(
            pipeline.model,
            pipeline.pixels,
            [prefix] * n,
            s.temperature,
            s.top_k,
            s.top_p,
            generator,
            guidance_scale=guidance,
        )
    except ValueError as e:
        raise PipelineError(str(e)) from None
