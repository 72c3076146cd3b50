"""The oneDNN switches of inference on a CPU: a runtime choice, made by the caller that knows
its workload, not by the model.

- `set_row_buckets(True)`: the calling thread pads the rows of oneDNN's linear layers to
  ROW_BUCKETS, so that a server whose batch sizes change at every step builds a bounded number
  of kernels (a server's decoding thread turns it on; one-off batch jobs leave it off).
- `set_onednn_linear(False)`: every inference-time linear layer takes torch's default path.

The mechanism (the padded product, the packed weights) is `model/linear.py`'s, which owns the
per-thread state these switches set: `model/` imports nothing from `runtime/`, so the switch
lives here and reaches down.
"""

from __future__ import annotations

from ..model.linear import ROW_BUCKETS, row_bucket, set_onednn_linear, set_row_buckets

__all__ = ["ROW_BUCKETS", "row_bucket", "set_onednn_linear", "set_row_buckets"]
