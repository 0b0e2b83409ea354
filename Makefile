# Two commands do all set-up: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint bench clean frontend

FRONTEND_SRC := $(shell find frontend/src frontend/public -type f 2>/dev/null) \
	$(wildcard frontend/index.html frontend/package.json frontend/vite.config.ts frontend/tsconfig*.json)
FRONTEND_DIST := frontend/dist/index.html

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

frontend/node_modules/.installed: frontend/package.json frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The UI is rebuilt only when its sources changed.
$(FRONTEND_DIST): frontend/node_modules/.installed $(FRONTEND_SRC)
	cd frontend && npm run build
	touch $@

frontend: $(FRONTEND_DIST)

run: $(STAMP) $(FRONTEND_DIST)
	$(PY) run.py

test: $(STAMP) $(FRONTEND_DIST)
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench: $(STAMP)
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) data
