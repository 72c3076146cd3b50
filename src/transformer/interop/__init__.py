"""Interop: other libraries' models in and out, with identical outputs (each converter is tested
for parity against the library it reads). In: a Hugging Face model or directory, a GGUF file, a
CTranslate2 Whisper directory, a `torch.nn.Transformer`. Out: our Model (and for Hugging Face,
their model back from ours); `transformer import-hf` writes the result as a model directory
(model_dir), `transformer export` uses `hf.to_hf`.

    hf/           Hugging Face, one module per family, both ways: BERT, GPT-2, Llama, Marian, T5,
                  ViT, Whisper (common.py: shared checks; loading.py: directories, GGUF, tokenizers)
    ct2.py        CTranslate2 Whisper directories (model.bin) read into our speech model
    torch_nn.py   the weights of a torch.nn.Transformer loaded into our encoder-decoder
"""
