# make run: install, start the embedded PostgreSQL + pgvector, load the demo corpus, materialise, recall.
# make test: install, lint (ruff, mypy --strict, import contracts), then pytest against the real embedded server
#            and the real embedding model.
# make dev: the Dagster UI on http://localhost:3000 (webserver + daemon).
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install lint run test soak dev lab bench wheel clean

install: $(STAMP)

# torch==2.13.0 first: it is a CPU build on local disk; any other torch pulls gigabytes of CUDA wheels.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet --config-settings editable_mode=compat -e '.[dev]'
	touch $(STAMP)

run: install
	$(VENV)/bin/memory-assets demo

lint: install
	$(VENV)/bin/ruff check memory_assets resources tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

test: lint
	$(PY) -m pytest

# make soak: the long reliability runs (pytest marker `soak`: faults, load, properties, the secret corpus); one run
# writes its figures, section by section, to bench/results/reliability.json (started afresh, so it is that run's)
soak: install
	rm -f bench/results/reliability.json
	$(PY) -m pytest -m soak tests/reliability

# A wheel that installs anywhere: migrations, named queries, resources and the demo data ship inside the package.
wheel: install
	rm -rf build
	$(PY) -m pip wheel --no-deps --no-build-isolation --wheel-dir dist .

dev: install
	$(VENV)/bin/memory-assets dev

# make lab: JupyterLab over notebooks/ on the project's kernel (.venv), the notebooks reading as memory_reader;
# LAB_ARGS go to `jupyter lab`, e.g. make lab LAB_ARGS="--no-browser --port 8890"
lab: install
	$(VENV)/bin/memory-assets lab $(LAB_ARGS)

# make bench: every part (ingest, embedding, recall, freshness, load, the daily graph, the mem0 peer when the `peer`
# extra is installed) through bench/harness.py; JSON per part and bench/results/summary.md. SIZE=smoke|default|full
SIZE ?= default
bench: install
	$(PY) bench/harness.py --size $(SIZE)

clean:
	rm -rf .memory_assets .pytest_cache .mypy_cache .ruff_cache build dist bench/results/*.tmp
