# goldenset: `make run` serves the API with sample incidents; `make test` runs the lint, the type
# check, the documentation site's build and the whole suite; `make docs` builds the site alone.
# All create .venv first if it is missing.

PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
# Every install takes exactly the versions (and files, by hash) of a lock in requirements/, made by
# `make lock` with uv for Python 3.11 on linux x86_64: dev.lock (everything: `make setup`, CI),
# full.lock and api.lock (the image's targets). PyTorch's pin in them is TORCH_SPEC, a CPU build, so
# pip never sees a multi-GB CUDA one. Another platform or version: `make TORCH_SPEC='torch==2.9.1'
# lock setup` rewrites the locks for it (setup stops while the lock's torch is not TORCH_SPEC's).
TORCH_SPEC ?= torch==2.13.0
LOCK := requirements/dev.lock
# uv does not read pip's configuration: the locks are resolved against the indexes pip is
# configured with (on these machines the local index that holds PyTorch's CPU wheel). Elsewhere,
# e.g. LOCK_INDEXES='--extra-index-url https://download.pytorch.org/whl/cpu'.
LOCK_INDEXES ?= $(addprefix --find-links ,$(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null)) \
	$(addprefix --extra-index-url ,$(shell $(PYTHON) -m pip config get global.extra-index-url 2>/dev/null))
UV_COMPILE = $(BIN)/uv pip compile --quiet --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	--index-strategy unsafe-best-match --no-emit-package goldenset-client --custom-compile-command 'make lock' $(LOCK_INDEXES) pyproject.toml
# Every database test runs once per backend listed here.
TEST_DATABASES ?= sqlite,postgresql
TEST_POSTGRES_URL ?= postgresql+psycopg://postgres@127.0.0.1:5432/test
# pytest-xdist worker processes for `make test` (every test has its own databases and folders).
TEST_WORKERS ?= 2
HOST ?= 127.0.0.1
PORT ?= 8000
SAMPLE := samples/cisa_kev/known_exploited_vulnerabilities.sample.json
SAMPLE_MAPPING := examples/mappings/cisa_kev.yaml
SAMPLE_EVAL := examples/evals/cisa_kev_sample.yaml

.PHONY: setup lock browser run test test-fast lint typecheck docs unit clean

setup: $(VENV)/.installed

$(VENV)/.installed: $(LOCK) pyproject.toml clients/python/pyproject.toml
	@grep -Eq '^torch==$(subst torch==,,$(TORCH_SPEC))(\+[a-z0-9.]+)? ' $(LOCK) || { \
	  echo "$(LOCK) does not pin $(TORCH_SPEC): run make TORCH_SPEC='$(TORCH_SPEC)' lock setup" >&2; exit 1; }
	$(BIN)/python -m pip --version >/dev/null 2>&1 || { rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install --quiet --upgrade pip
	@# The lock's versions, each file checked against its hash; nothing is resolved, so nothing comes
	@# in at another version or build. Then this repository's two distributions, editable.
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r $(LOCK)
	$(BIN)/python -m pip install --quiet --no-deps -e ./clients/python -e .
	$(BIN)/python -m pip check >/dev/null || { $(BIN)/python -m pip check; echo "$(LOCK) does not cover the dependencies: run make lock" >&2; exit 1; }
	@# The default (auto) embedding backend: openvino and openvino-int8 exported once from the bundled
	@# weights (offline) and timed on this machine; the faster is recorded and used.
	HF_HUB_OFFLINE=1 $(BIN)/python -c "from embedding.backend_choice import machine_choice; print('embedding backend on this machine:', machine_choice())"
	touch $@

# Rewrites the locks from pyproject.toml (after changing a dependency, or TORCH_SPEC). full.lock and
# api.lock are constrained by dev.lock, so every lock names the same version of a package. uv comes
# from dev.lock, installed into the virtual environment if it is not there yet.
lock:
	$(BIN)/python -m pip --version >/dev/null 2>&1 || { rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); }
	test -x $(BIN)/uv || $(BIN)/python -m pip install --quiet "$$(grep -Eo '^uv==[^ ]+' $(LOCK))"
	printf '# The TORCH_SPEC the locks were made with (make lock).\n%s\n' '$(TORCH_SPEC)' > requirements/torch.txt
	$(UV_COMPILE) --extra embeddings --extra otel --extra dev --constraint requirements/torch.txt --output-file $(LOCK)
	$(UV_COMPILE) --extra embeddings --extra otel --constraint $(LOCK) --output-file requirements/full.lock
	$(UV_COMPILE) --extra otel --constraint $(LOCK) --output-file requirements/api.lock

# The web UI tests drive Debian's Chromium through Playwright (Playwright's own browser download
# is not used). Installed here when missing and running as root; otherwise says how.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the web UI tests"; \
	    apt-get install -y -q chromium >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; \
	  else \
	    echo "the web UI tests need Chromium: run 'sudo apt-get install chromium' (or put chromium on PATH)" >&2; exit 1; \
	  fi; }

run: setup
	$(BIN)/goldenset migrate
	$(BIN)/goldenset ingest $(SAMPLE) --source cisa-kev-sample --mapping $(SAMPLE_MAPPING)
	$(BIN)/goldenset eval create --file $(SAMPLE_EVAL) --exist-ok
	$(BIN)/goldenset refresh --eval cisa-kev-sample
	@echo
	@echo "goldenset is starting on http://$(HOST):$(PORT): the web UI is at /ui, the API docs at /docs."
	@echo "Get a token in another terminal with:"
	@echo "    $(BIN)/goldenset token create --name me --scopes read,curate"
	@echo "then sign in at http://$(HOST):$(PORT)/ui/login with it, or call the API:"
	@echo "    curl -H \"Authorization: Bearer <token>\" http://$(HOST):$(PORT)/v1/evals/cisa-kev-sample/releases/latest"
	@echo
	$(BIN)/goldenset serve --host $(HOST) --port $(PORT)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache

typecheck: setup
	$(BIN)/mypy

# The documentation site: docs/ (the pages) and mkdocs.yml (the nav) built into var/site/ with the
# built-in theme, offline. --strict turns every warning into a failure: a page missing from the
# nav, a link to a missing page or anchor, a link that leaves docs/.
docs: setup
	$(BIN)/mkdocs build --strict --quiet

test: setup browser lint typecheck docs
	GOLDENSET_TEST_DATABASES=$(TEST_DATABASES) GOLDENSET_TEST_POSTGRES_URL=$(TEST_POSTGRES_URL) $(BIN)/pytest -n $(TEST_WORKERS)

# The fast tier, for the edit-test loop: the tests marked unit or integration, of every domain, on
# SQLite (no server process, browser or PostgreSQL), collected from the kind folders only, so the
# e2e and browser modules are not even imported. A test's kind is its folder (tests/plugins/kinds.py).
test-fast: setup lint
	GOLDENSET_TEST_DATABASES=sqlite $(BIN)/pytest -n $(TEST_WORKERS) -m "unit or integration" $(wildcard tests/*/unit tests/*/integration)

unit: setup
	GOLDENSET_TEST_DATABASES=sqlite $(BIN)/pytest -m unit

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache *.egg-info
