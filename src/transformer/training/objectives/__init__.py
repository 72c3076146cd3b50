"""What a run learns: each objective's data, batches, model, loss and validation, behind one
interface (base.Objective) that the loop (trainer.py) drives. One module per family:

- seq2seq.py: seq2seq (translation, text-to-text), lm on one example per line (data.pack = false)
  and span_corruption (T5): teacher forcing over target tokens; best/ by validation loss.
- lm.py: lm on packed text (the default): blocks of one token stream, GPT-style; best/ by loss.
- encoder.py: mlm (BERT's masked-LM) and what the encoder family shares; best/ by loss.
- classify.py: classify, a label per text or per image; best/ by validation accuracy.
- qa.py: qa, extractive question answering (a span head, SQuAD's data); best/ by validation F1.
- sentences.py: qa_sentences, answer-sentence selection on the same data (a sentence head: which
  sentences answer); best/ by validation F1.
- speech.py: speech, speech recognition (model.audio, Whisper's shape); best/ by validation WER.
- detection/: detection, object detection as set prediction (model.detection, DETR), with its set
  and dense losses; best/ by validation mAP.
- image_lm.py: image_lm, images generated pixel by pixel by a decoder (Image GPT); best/ by loss.
- contrastive.py: contrastive, a text-image dual encoder on images and their names (CLIP); best/
  by validation zero-shot accuracy.
- chat.py: chat, supervised fine-tuning of a chat model on conversations, the loss on the
  assistant's turns; best/ by loss.
- caption.py: caption, image captioning (model.vision under a text decoder), each image's name its
  caption; best/ by validation exact match.

Which objective a run trains is the table of tasks' answer (transformer.tasks.prepare_objective):
each task makes its own.
"""

from __future__ import annotations

from .base import Objective, StepSums
from .caption import Caption
from .chat import ChatSFT
from .classify import Classify, ImageClassify
from .contrastive import Contrastive
from .detection.objective import Detection
from .encoder import MaskedLM, encoder_model
from .image_lm import ImageLM
from .lm import PackedLM
from .qa import SpanQA
from .sentences import SentenceQA
from .seq2seq import Seq2Seq, SpanCorruption
from .speech import Speech

__all__ = [
    "Caption",
    "ChatSFT",
    "Classify",
    "Contrastive",
    "Detection",
    "ImageClassify",
    "ImageLM",
    "MaskedLM",
    "Objective",
    "PackedLM",
    "SentenceQA",
    "Seq2Seq",
    "SpanCorruption",
    "SpanQA",
    "Speech",
    "StepSums",
    "encoder_model",
]
