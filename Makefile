# lovia — developer commands. `make demo` and `make test` work from a fresh clone.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.DEFAULT_GOAL := help
.PHONY: help install demo docs test test-fast lint typecheck format bench bench-quick mutate up down clean

help:  ## list the commands
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[otel,postgres,mcp,redis,web,celery,dbos,temporal,fast,docs,dev]'
	rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP)  ## create .venv and install lovia with every extra and the dev tools

# The demo records into the store `lovia` reads by default ($LOVIA_STORE, else
# sqlite:///.lovia/lovia.db), so a plain `lovia runs` afterwards shows it.
demo: $(STAMP)  ## run an agent with tools, traced and stored, then show its trace and replay
	$(PY) examples/01_quickstart.py
	$(VENV)/bin/lovia trace last
	$(VENV)/bin/lovia replay last

docs: $(STAMP)  ## build the documentation site into site/ (mkdocs, strict: warnings fail)
	$(VENV)/bin/mkdocs build --strict --site-dir site

lint: $(STAMP)  ## ruff check + format check
	$(VENV)/bin/ruff check src tests examples bench
	$(VENV)/bin/ruff format --check src tests examples

typecheck: $(STAMP)  ## pyright, strict on src/ and on the type tests (tests/typing)
	$(VENV)/bin/pyright src tests/typing

format: $(STAMP)  ## apply ruff fixes and formatting
	$(VENV)/bin/ruff check --fix src tests examples bench
	$(VENV)/bin/ruff format src tests examples

# The suite runs in JOBS worker processes (pytest-xdist); each test file runs whole in one
# worker, so its module fixtures (a browser, a Prometheus) start once. JOBS=0 runs it in
# one process, where SEED=n repeats an order exactly (with workers, which file a worker
# takes next depends on timing).
JOBS ?= 2
test: lint typecheck  ## lint, typecheck and the whole suite in random order (SEED=n, JOBS=n)
	@seed=$${SEED:-$$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}; \
	echo "test order: pytest-randomly seed $$seed (repeat with: make test SEED=$$seed JOBS=0)"; \
	$(PY) -m pytest -q -p no:cacheprovider -p randomly --randomly-seed=$$seed \
		-n $(JOBS) --dist loadfile

test-fast: $(STAMP)  ## only the tests
	$(PY) -m pytest -q -x

bench: $(STAMP)  ## benchmarks against the raw-httpx floor and the peers (slow)
	$(PY) bench/run.py

bench-quick: $(STAMP)  ## the CPU ratios table only (< 2 minutes): check a change before it lands
	$(PY) bench/run.py --quick

mutate: $(STAMP)  ## mutation testing of the promise-carrying modules (slow; MODULES="usage sse" or CHANGED=1)
	$(PY) scripts/mutate.py $(if $(CHANGED),--changed,) $(MODULES)

up:  ## start the observability stack (collector, Jaeger, Prometheus, Alertmanager, Grafana)
	docker compose up -d

down:  ## stop it (add -v to also delete stored metrics)
	docker compose down

clean:  ## remove the venv and local state
	rm -rf $(VENV) .lovia .pytest_cache .ruff_cache site
