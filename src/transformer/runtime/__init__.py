"""Choices made by measuring this machine rather than assumed: training precision (bf16 or fp32)
and attention kernel (precision.py, with their cache), inference precision, and the allocator's
tuning for CPU training (allocator.py)."""
