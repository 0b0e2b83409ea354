# Two commands do all set-up: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test smoke lock lint typecheck bench clean frontend sandbox browser nginx cgroup2-vm mutate

FRONTEND_SRC := $(shell find frontend/src frontend/public -type f 2>/dev/null) \
	$(wildcard frontend/index.html frontend/package.json frontend/vite.config.ts frontend/tsconfig*.json)
FRONTEND_DIST := frontend/dist/index.html

# Every transitive dependency, pinned with hashes, from requirements.lock (`make lock` rebuilds it from the
# top-level requirements.txt and requirements-dev.txt).
$(STAMP): requirements.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --require-hashes -r requirements.lock
	touch $(STAMP)

lock: $(STAMP)
	$(VENV)/bin/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url \
	  --no-emit-find-links --output-file requirements.lock requirements-dev.txt

frontend/node_modules/.installed: frontend/package.json frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The UI is rebuilt only when its sources changed.
$(FRONTEND_DIST): frontend/node_modules/.installed $(FRONTEND_SRC)
	cd frontend && npm run build
	touch $@

frontend: $(FRONTEND_DIST)

# Agents' commands run in a bubblewrap sandbox: install it where it is missing and we can.
sandbox:
	@command -v bwrap >/dev/null && command -v slirp4netns >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap slirp4netns) \
	      >/dev/null || echo "could not install the sandbox; run: apt-get install bubblewrap slirp4netns"; \
	  else echo "the command sandbox needs bubblewrap; run: sudo apt-get install bubblewrap slirp4netns"; fi; }

# The browser tests drive Debian's Chromium (never a downloaded browser) and need a CJK font for the
# demo's Chinese chip: install both where they are missing and we can (root with apt), else stop with
# the one command to run.
browser:
	@[ -x /usr/bin/chromium ] && fc-list 2>/dev/null | grep -qi 'noto sans cjk' || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium fonts-noto-cjk) >/dev/null \
	      || { echo "could not install the browser; run: apt-get install -y chromium fonts-noto-cjk"; exit 1; }; \
	  else echo "the browser tests need Chromium and a CJK font; run: sudo apt-get install -y chromium fonts-noto-cjk"; \
	    exit 1; fi; }

# The cluster test (test/integration/test_nginx_cluster.py) and `bench/load.py --processes N` put several
# processes behind Debian's nginx (deploy/): installed like the browser, else the one command to run.
nginx:
	@[ -x /usr/sbin/nginx ] || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx) >/dev/null \
	      || { echo "could not install nginx; run: apt-get install -y nginx"; exit 1; }; \
	  else echo "the cluster test needs nginx; run: sudo apt-get install -y nginx"; exit 1; fi; }

# The cgroup v2 test boots Debian's kernel under qemu (test/vm/cgroup2_vm.py): install qemu and busybox, fetch it.
cgroup2-vm: $(STAMP)
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  $(PY) -m test.vm.cgroup2_vm || echo "could not prepare the cgroup2 VM; its test is skipped"; \
	else echo "the cgroup2 VM needs root and apt-get; its test is skipped"; fi

run: $(STAMP) $(FRONTEND_DIST) sandbox
	$(PY) run.py

# Under 30 s: every module compiles, the entry points import by name, one REST and one Socket.IO round trip
# (without the fuzzers' pytest plugins, which take seconds to load and serve no smoke test).
smoke: $(STAMP)
	$(PY) -m pytest -q -p no:schemathesis -p no:hypothesispytest test/smoke

test: $(STAMP) $(FRONTEND_DIST) sandbox browser nginx cgroup2-vm smoke
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	cd frontend && npm test --silent
	CI=$${CI:-1} $(PY) -m pytest -q --ignore=test/smoke

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# mypy --strict over modules/ and server/ with pydantic's plugin (pyproject.toml's [tool.mypy]).
typecheck: $(STAMP)
	$(VENV)/bin/mypy

bench: $(STAMP)
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# Mutation testing of the core (files in pyproject.toml's [tool.mutmut]) against the unit tests (SQLite, and
# PostgreSQL and MariaDB where a test runs there too); not part of `make test`. MUTANTS narrows it, e.g.
# MUTANTS='modules.storage.pending_messages*'. Results are cached in mutants/ (delete it to start afresh); the
# report counts uncovered mutants as survivors. Four children: many mutants only wait (a notice that never comes).
MUTANTS ?=
mutate: $(STAMP)
	-$(VENV)/bin/mutmut run --max-children 4 $(MUTANTS)
	$(PY) tools/mutation_report.py

clean:
	rm -rf $(VENV) data mutants
