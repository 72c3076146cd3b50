"""The search machinery under every decoding strategy: the Stepper over the KV cache (step.py),
the lanes (lanes.py; one_row.py and beams.py: the one one-row step and the one beam step, which
offline search and the server's continuous batching both run), an offline batch stepped to the end
(batch.py), the server's choice of lane (continuous.py), length penalties, repetition guards, the
sampling draw and the attention history."""
