# make run: serve demo data on http://127.0.0.1:8000/api/comments/  ·  make test: the whole
# suite, with coverage  ·  make lint: ruff and mypy
# make serve: the same behind nginx, as in production (README: Production)
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
WORKERS ?= 2
WRITE_WORKERS ?= 2
DEMO_COMMENTS ?= 2000
DEMO_TARGETS ?= 40

.PHONY: install run serve test lint bench bench-full soak clean-demo

# The runtime pins (requirements.txt) and what tests, lint, type checks and coverage add.
$(BIN)/.installed: requirements.txt requirements-dev.txt pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	$(BIN)/python -m pip install --quiet --no-deps --editable .   # the package itself, and the commentsvc command
	touch $@

install: $(BIN)/.installed

run: install
	@$(BIN)/python -m commentsvc.operations.ports --host $(HOST) --port $(PORT) --fix "PORT={next} make run"
	$(BIN)/flask --app app init-db
	$(BIN)/flask --app app seed --if-empty --comments $(DEMO_COMMENTS) --targets $(DEMO_TARGETS) --seed 1
	@echo "Serving comments at http://$(HOST):$(PORT)/api/comments/"
	$(BIN)/gunicorn --bind $(HOST):$(PORT) --workers $(WORKERS) wsgi:app

# Production: nginx (buffering, slow-client timeouts, JSON errors) in front of gunicorn
# and the writers' own gunicorn on private unix sockets, all stopped together
# (commentsvc/operations/serving.py).
serve: install
	@$(BIN)/python -m commentsvc.operations.ports --host $(HOST) --port $(PORT) --fix "PORT={next} make serve"
	$(BIN)/flask --app app init-db
	$(BIN)/python -m commentsvc.operations.serving --host $(HOST) --port $(PORT) --workers $(WORKERS) --write-workers $(WRITE_WORKERS)

# The suite under coverage (branches; the pytest process, not the servers it starts), then
# the report with its total, also after a failure (make test then fails all the same).
test: install
	$(BIN)/python -m coverage run -m pytest; status=$$?; \
	$(BIN)/python -m coverage report; exit $$status

# ruff on everything, mypy strict on the package ([tool.mypy] in pyproject.toml).
lint: install
	$(BIN)/python -m ruff check .
	$(BIN)/python -m mypy

# Benchmarks on the local PostgreSQL server (databases commentsvc_bench*): see BENCHMARKS.md.
bench: install
	$(BIN)/python bench/run.py --comments 1000000

bench-full: install
	$(BIN)/python bench/run.py --comments 10000000

# A minute of mixed load on a fresh database of the local PostgreSQL server, then every
# check that nothing was lost (see RELIABILITY.md).
SOAK_SECONDS ?= 60
soak: install
	$(BIN)/python bench/load_mix.py --duration $(SOAK_SECONDS) --json bench/results/soak.json

clean-demo:
	rm -f instance/commentsvc.sqlite3 instance/commentsvc.sqlite3-wal instance/commentsvc.sqlite3-shm
