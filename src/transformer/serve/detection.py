"""POST /v1/detect: a detector's objects in base64 image files, as Pipeline.detect finds them in the
same files (decoding.detect).

The rules:
- Only a detector (family "detection") answers; other models answer 400 naming their endpoint, and
  a detector answers 400 naming /v1/detect on theirs (State.serving).
- The images are decoded and resized here, on a thread beside the event loop
  (uploads.decode_any_size: a bad one is a 422 naming it, one too large a 413, more than
  --max-lines a 413), then run on the worker as one job; the boxes come back in pixels of each
  image sent.
- Scores are rounded to 6 decimals, box corners to 2 (a hundredth of a pixel).
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request

from .errors import ApiError
from .schemas import DetectRequest, DetectResponse
from .state import State
from .uploads import decode_any_size
from .worker import Job

router = APIRouter()


@router.post("/v1/detect", response_model=DetectResponse)
async def detect(body: DetectRequest, request: Request):
    state: State = request.app.state.serve
    pipeline, config = state.serving("/v1/detect"), state.config
    if not body.images:
        raise ApiError(422, "invalid_request", "images is an empty list: send an image file")
    if len(body.images) > config.max_lines:
        raise ApiError(
            413,
            "too_many_lines",
            f"the request has {len(body.images)} images, more than this server takes in one "
            f"request ({config.max_lines}; see --max-lines): send them in several requests",
        )
    d = pipeline.model.config.detection
    images, sizes = await asyncio.to_thread(
        decode_any_size, body.images, d.channels, d.image_size
    )  # off the event loop: /health answers meanwhile

    def run() -> list[list[dict]]:
        found = pipeline.detect(images, threshold=body.threshold)  # boxes in size x size pixels
        return [
            [_answer(o, width / d.image_size, height / d.image_size) for o in objects]
            for objects, (width, height) in zip(found, sizes, strict=True)
        ]

    detections = await state.submit(Job("detect", run=run), request)
    return {
        "detections": detections,
        "sizes": [list(size) for size in sizes],
        "model": request.app.state.model_name,
    }


def _answer(o, sx: float, sy: float) -> dict:
    """An object found in the resized image, its box scaled back to the image sent."""
    x0, y0, x1, y1 = o.box
    box = [x0 * sx, y0 * sy, x1 * sx, y1 * sy]
    return {"label": o.label, "score": round(o.score, 6), "box": [round(v, 2) for v in box]}
