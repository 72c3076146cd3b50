"""Choices made by measuring this machine rather than assumed: training precision (bf16 or fp32)
and attention kernel (precision.py, with their cache), inference precision, the allocator's
tuning for CPU training (allocator.py), and oneDNN's row buckets and linear path for inference
(onednn.py)."""
