"""The tasks a user trains and runs, each in one module, listed in one table (TASKS).

Config checks, `prepare_objective`, `evaluate`, sweeps, `Pipeline` and the server ask this table
instead of dispatching on objectives or model families by hand. Adding a task is one module (a
`Task` record: see base.py) and one line in table.py. The order is the order `model_task` tries
them in: the special families before the plain ones they are built on.

- image_generation.py: Image GPT (decoder over pixel tokens)
- detection.py: DETR
- captioning.py: a ViT under a text decoder
- speech.py: Whisper-style speech recognition
- contrastive.py: CLIP-style dual encoders
- qa.py: extractive question answering (span head)
- classification.py: labels for texts and for images
- masked_lm.py: BERT's masked-LM
- translation.py: translation, text-to-text, T5's span corruption
- lm.py: language models

table.py holds the table and the questions asked of it (run_task, model_task, prepare_objective);
beside them: base.py (the Task record), inputs.py and figures.py (what a task's models read and the
attention figure drawn of them), evaluation.py (one `transformer evaluate` run as a typed
record, read by the evaluate function each `Scored` row holds) and reports.py (what those
functions share).
"""

from .base import Scored, Task
from .table import TASKS, model_task, prepare_objective, run_task

__all__ = ["TASKS", "Scored", "Task", "model_task", "prepare_objective", "run_task"]
