"""How `transformer serve` runs: ServeConfig, where it listens and the server's limits.

Each setting is defined once here; `transformer serve`'s flags (type, default, help, check) are
derived from it (see config.checks). The resource caps on a request's decoding settings (beam
<= 64, max_new_tokens <= 4096, ...) are the server's own: transformer.serve.schemas.
"""

from __future__ import annotations

from dataclasses import dataclass

from .checks import check_language_pair, check_settings, check_types, setting

BATCHING = ("continuous", "whole")
"""How the server batches requests (ServeConfig.batching)."""

API_KEY_ENV = "TRANSFORMER_API_KEY"
"""The environment variable the API key is read from (better than --api-key, which ps shows)."""


@dataclass
class ServeConfig:
    """The server's limits, its API key and CORS origin, and where it listens."""

    max_batch_tokens: int = setting(4000, gt=0, flag="--max-batch-tokens", give="a positive number")
    """Source tokens decoded together at most (the same budget as translate's --batch-tokens)."""
    batching: str = setting("continuous", choices=BATCHING, flag="--batching")
    """continuous: requests join and leave the running batch between decoding steps; whole: a batch
    is formed from the waiting requests and decoded to its end before the next one starts."""
    max_waiting_steps: int = setting(8, gt=0, flag="--max-waiting-steps", give="a positive number")
    """Continuous batching: while requests run, waiting ones join when as many wait as run, or at
    the latest after this many decoding steps (each admission costs the running batch one pass
    of the newcomers' encoder)."""
    max_wait_ms: float = setting(
        10.0, ge=0, finite=True, flag="--max-wait-ms", give="a number of milliseconds >= 0"
    )
    """How long the first request of a batch waits for others to batch with, in milliseconds
    (whole-batch mode; continuous batching admits at the next step)."""
    max_queue: int = setting(256, gt=0, flag="--max-queue", give="a positive number")
    """Requests waiting at most; more are refused with 503 and Retry-After."""
    timeout: float = setting(
        60.0, gt=0, finite=True, flag="--timeout", give="a number of seconds > 0"
    )
    """Seconds a request may take, waiting included; then 504."""
    max_lines: int = setting(256, gt=0, flag="--max-lines", give="a positive number")
    """Lines (or texts, images) in one request at most; 413 beyond."""
    max_body_bytes: int = setting(1 << 20, gt=0, flag="--max-body-bytes", give="a positive number")
    """Request body size at most, in bytes (1 MiB: 30 s of 16 kHz speech in base64 is 1.3 MB, so
    raise it to serve long audio); 413 beyond."""
    max_audio_seconds: float = setting(
        600.0, gt=0, finite=True, flag="--max-audio-seconds", give="a number of seconds > 0"
    )
    """Seconds of audio one /v1/transcribe request may send at most; 413 beyond."""
    api_key: str | None = setting(None, flag="--api-key")
    """Require 'Authorization: Bearer KEY' (better: the TRANSFORMER_API_KEY environment variable,
    which ps does not show)."""
    cors_origin: str | None = setting(None, flag="--cors-origin")
    """Allow browser calls from this origin (none when unset)."""
    source_lang: str | None = setting(None, flag="--source-lang")
    """The language the model translates from, as a code (es), with --target-lang: LibreTranslate's
    API (/translate, /languages) serves this pair; unset, the pair the model directory records
    (languages.json, from the recipe's data.source_lang and target_lang)."""
    target_lang: str | None = setting(None, flag="--target-lang")
    """The language the model translates into, as a code (en); see --source-lang."""
    host: str = setting("127.0.0.1", flag="--host")
    """Address to listen on (127.0.0.1: this machine only)."""
    port: int = setting(8000, ge=0, le=65535, flag="--port", give="a positive number up to 65535")
    """Port to listen on."""
    drain_timeout: float = setting(
        30.0, ge=0, finite=True, flag="--drain-timeout", give="a number of seconds >= 0"
    )
    """On SIGTERM/SIGINT, seconds to let requests in flight finish."""

    def __post_init__(self) -> None:
        check_types(self, "serve")
        check_settings(self, "serve")
        check_language_pair(
            "serve", self.source_lang, self.target_lang, "--source-lang es --target-lang en"
        )
