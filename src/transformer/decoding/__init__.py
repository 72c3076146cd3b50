"""Decoding: greedy search, batched beam search and sampling, all over the model's KV cache (the
machinery in search/), the Pipeline that loads a model directory, and each task's inference call."""
