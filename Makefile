# The README's commands. `make setup` installs torch (CPU wheel) only when it is missing.
PYTHON ?= python3
export HF_HUB_OFFLINE = 1
export TRANSFORMERS_OFFLINE = 1

.PHONY: setup test lint bench

setup:
	@$(PYTHON) -c "import torch" 2>/dev/null || $(PYTHON) -m pip install torch==2.13.0
	$(PYTHON) -m pip install -e ".[dev]"

test:
	$(PYTHON) -m pytest -q

lint:
	$(PYTHON) -m ruff check src tests benchmarks

bench:
	$(PYTHON) benchmarks/decode.py
