"""Hugging Face weights in and out: BERT, GPT-2, Llama, Marian, T5, ViT and Whisper, with identical
outputs.

    model = from_hf(hf_model_or_path)          # our EncoderOnly / DecoderOnly / EncoderDecoder
    hf_model = to_hf(model)                    # the matching transformers model

`from_hf` accepts a transformers model object, a Hugging Face model directory, or a .gguf
file (read through transformers' GGUF reader); `import_hf(path, out)` writes one of our
model directories from such a path, with its tokenizer and chat template (the CLI's
`transformer import-hf`). What our ModelConfig cannot express raises HFConversionError
naming the Hugging Face config field. Needs the `hf` extra (transformers).

    convert.py     from_hf, to_hf: the family module by model_type (or by our config)
    loading.py     load_hf: a directory or .gguf file read, with its tokenizer
    importing.py   import_hf: one of our model directories written from such a path
    common.py      HFConversionError and the weight-copying helpers the families share
    bert.py gpt2.py llama.py marian.py t5.py vit.py whisper.py   one family each, both ways
"""

from .common import HFConversionError
from .convert import from_hf, to_hf
from .importing import import_hf

__all__ = ["HFConversionError", "from_hf", "import_hf", "to_hf"]
