# Mnemo: `make run` starts everything, `make test` runs the whole suite.
# Both install what they need first: uv (into .tools/), Python 3.12, the locked dependencies.

UV_VERSION := 0.13.9
TOOLS := .tools
UV := $(TOOLS)/bin/uv
PYTHON ?= python3
MNEMO_HOST ?= 127.0.0.1
MNEMO_PORT ?= 8000
export MNEMO_HOST MNEMO_PORT

.PHONY: install run test lint format bench browser

$(UV):
	@echo "Installing uv $(UV_VERSION) into $(TOOLS)/"
	@$(PYTHON) -m venv $(TOOLS) && $(TOOLS)/bin/python -m pip install --quiet "uv==$(UV_VERSION)" \
	  || { rm -rf $(TOOLS) && $(PYTHON) -m pip install --quiet --target $(TOOLS)/pkgs "uv==$(UV_VERSION)" \
	       && mkdir -p $(TOOLS)/bin && ln -sf ../pkgs/bin/uv $(UV); }

install: $(UV)
	@$(UV) sync --frozen --quiet

# supervisord runs PostgreSQL, Valkey, the web server, the worker and beat, restarting any
# that dies (lib/stack.py).
run: install
	@$(UV) run --frozen python -m lib.stack

# The browser tests drive Debian's chromium (Playwright's own browser download is not used).
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

browser:
	@test -x $(CHROMIUM) || { echo "Installing Debian's chromium for the browser tests"; \
	  $(SUDO) apt-get update -qq \
	  && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; }
	@test -x $(CHROMIUM) || { echo "$(CHROMIUM) is still missing after the install" >&2; exit 1; }

test: install browser
	$(UV) run --frozen ruff check .
	$(UV) run --frozen ruff format --check .
	$(UV) run --frozen pytest

bench: install
	$(UV) run --frozen python bench/api.py
	$(UV) run --frozen python bench/embeddings.py
	$(UV) run --frozen python bench/duplicates.py
	$(UV) run --frozen python bench/credentials.py
	$(UV) run --frozen python bench/turns.py
	$(UV) run --frozen python bench/llm.py
	$(UV) run --frozen python bench/mcp.py
	$(UV) run --frozen python bench/export.py
	$(UV) run --frozen python bench/import_archive.py
	$(UV) run --frozen python bench/search.py
	$(UV) run --frozen python bench/ingest.py
	$(UV) run --frozen python bench/heavy.py
	$(UV) run --frozen python bench/soak.py
	$(UV) run --frozen python bench/restart.py
	$(UV) run --frozen python bench/security.py
	$(UV) run --frozen python bench/multilingual.py
	$(UV) run --frozen python bench/retrieval.py

lint: install
	$(UV) run --frozen ruff check .
	$(UV) run --frozen ruff format --check .

format: install
	$(UV) run --frozen ruff format .
	$(UV) run --frozen ruff check --fix .
