"""Model directory -> where models are deployed: CTranslate2 (`ct2`), Hugging Face (`hf`) or
llama.cpp / Ollama (`gguf`), or a plain model directory (`dir`: a LoRA model's adapters folded into
its weights, so that it no longer needs its base model).

    from transformer.export.targets import export_model
    export_model("runs/demo/averaged", to="ct2", out="demo-ct2")  # transformer export ... --to ct2
    export_model("runs/demo/averaged", to="hf", out="demo-hf")    # transformer export ... --to hf
    export_model("runs/lm/averaged", to="gguf", out="lm.gguf")    # transformer export ... --to gguf
    export_model("runs/chat-lora/best", to="dir", out="chat")     # transformer export ... --to dir

A LoRA model directory (adapter.json beside its base) is read with its adapters merged into the
weights (model_dir.load_model) whatever the target: every export is of the merged model.

    targets.py     export_model (one entry over the targets, and `dir`), usage
    common.py      what the targets share: ExportError, write_directory, python_path
    ct2.py         CTranslate2
    hf.py          Hugging Face (through interop.hf.to_hf)
    gguf.py        GGUF (gguf_vocab.py: its tokenizer tables)
"""
