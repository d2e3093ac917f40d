# Every target creates .venv when it is missing, so a fresh clone needs nothing
# installed by hand beyond a Python 3.11+ interpreter.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CODE := $(wildcard src tests examples benchmarks scripts)

.PHONY: demo test lint format typecheck bench bench-scaleout soak clean renderers screenshots

# Graphviz (`dot`) and the Mermaid CLI (`mmdc`) draw workflow graphs in the
# rendering tests; Debian's Prometheus (and its promtool) scrapes treadle in
# tests/operations/test_prometheus_scrape.py and checks docs/prometheus/alerts.yml. Only the package registries are reachable, so puppeteer
# must not fetch a browser of its own: it drives Debian's chromium instead.
# mermaid-cli 12 needs Node 22; the machines have Node 20.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
TOOLS := .tools
MMDC := $(TOOLS)/node_modules/.bin/mmdc
PUPPETEER_CONFIG := $(TOOLS)/puppeteer.json
NODE_PACKAGES := @mermaid-js/mermaid-cli@11.17.0 puppeteer@24.43.1
CHROMIUM := /usr/bin/chromium
# The sign-in tests run a real, certified OpenID Connect provider (panva's
# oidc-provider, on Node 20) from tests/server/oidc_provider.mjs.
OIDC_PACKAGE := oidc-provider@9.13.3
OIDC_PROVIDER := $(TOOLS)/node_modules/oidc-provider/package.json

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/document_review.py

lint: $(STAMP)
	$(BIN)/ruff check $(CODE)
	$(BIN)/ruff format --check $(CODE)
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format $(CODE)
	$(BIN)/ruff check --fix $(CODE)

typecheck: $(STAMP)
	$(BIN)/mypy

# --dist loadgroup: a module's tests sharing a module fixture go to one worker
# (tests/conftest.py groups them), every other test is dealt out on its own.
# One worker more than cores: many tests wait on processes they start, so a
# third worker on two cores keeps both busy (307 s against 367 s). The
# processes a test starts on PostgreSQL open at most 3 connections each
# (TREADLE_CONNECTIONS, tests/conftest.py), so the fleets and the other
# process tests beside them stay under the server's 100.
WORKERS := $(shell echo $$(( $$(nproc) + 1 )))
# These machines set PYTHONDONTWRITEBYTECODE=1, so every process a test starts
# compiled treadle and the test apps from source again, and every pytest worker
# rewrote every test module's asserts again: the suite's processes spent 412
# CPU-seconds instead of 368 (-n 4, 339 s against 317 s). The test run writes
# bytecode, compiled once before the workers start.
test: lint renderers
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m compileall -q src tests > /dev/null
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -m "not soak" -n $(WORKERS) --dist loadgroup

# Bytecode compiled first, as an installed package has it: a worker process the
# scale-out benchmarks start (and time) would otherwise compile every module it imports.
bench: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m compileall -q src benchmarks > /dev/null
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/scaleout.py
	$(BIN)/python benchmarks/postgres_starts.py
	$(BIN)/python benchmarks/cluster.py
	$(BIN)/python benchmarks/server.py
	$(BIN)/python benchmarks/agents.py
	$(BIN)/python benchmarks/declarative.py
	$(BIN)/python benchmarks/versions.py
	$(BIN)/python benchmarks/metrics.py
	$(BIN)/python benchmarks/commit_layouts.py
	$(BIN)/python benchmarks/gc_share.py

# 1, 2 and 4 `treadle worker` processes on one PostgreSQL (TREADLE_BENCH_POSTGRES_DSN,
# else the local server); writes benchmarks/SCALEOUT.md, about 2 minutes on 2 cores.
bench-scaleout: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m compileall -q src benchmarks > /dev/null
	$(BIN)/python benchmarks/scaleout.py

# Ten seeded chaos repetitions (tests/scaleout/test_chaos.py: 4 `treadle worker`
# processes on PostgreSQL, one SIGKILLed, one SIGSTOPped); writes their figures to
# benchmarks/SOAK.md, or to the file TREADLE_SOAK_REPORT names.
soak: $(STAMP)
	$(BIN)/pytest -m soak --timeout 3600

# Retakes the page's screenshots in docs/images (the browser tests take them; an
# ordinary run of the suite writes them to a scratch folder instead).
screenshots: $(STAMP) renderers
	TREADLE_SCREENSHOTS=1 $(BIN)/pytest tests/server/test_page_browser.py -p no:cacheprovider

# Installs only what is missing, so it is quick to run again; the logs of a
# failed install are printed, those of a good one stay in $(TOOLS)/.
renderers: $(PUPPETEER_CONFIG)
	@packages=""; \
	command -v dot >/dev/null || packages="$$packages graphviz"; \
	test -x $(CHROMIUM) || packages="$$packages chromium"; \
	command -v prometheus >/dev/null || packages="$$packages prometheus"; \
	if [ -n "$$packages" ]; then \
		echo "renderers: installing$$packages from Debian"; \
		{ $(SUDO) apt-get update -q && $(SUDO) env DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -q $$packages; } >$(TOOLS)/apt.log 2>&1 \
			|| { cat $(TOOLS)/apt.log; exit 1; }; \
	fi
	@test -x $(MMDC) || { \
		echo "renderers: installing $(NODE_PACKAGES) into $(TOOLS)"; \
		PUPPETEER_SKIP_DOWNLOAD=1 npm install --prefix $(TOOLS) --no-audit --no-fund \
			$(NODE_PACKAGES) >$(TOOLS)/npm.log 2>&1 || { cat $(TOOLS)/npm.log; exit 1; }; }
	@test -f $(OIDC_PROVIDER) || { \
		echo "renderers: installing $(OIDC_PACKAGE) into $(TOOLS)"; \
		npm install --prefix $(TOOLS) --no-audit --no-fund \
			$(OIDC_PACKAGE) >$(TOOLS)/npm-oidc.log 2>&1 || { cat $(TOOLS)/npm-oidc.log; exit 1; }; }

$(PUPPETEER_CONFIG): Makefile
	@mkdir -p $(TOOLS)
	@printf '%s\n' '{' \
		'  "executablePath": "$(CHROMIUM)",' \
		'  "args": ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",' \
		'           "--disable-component-update", "--disable-sync"]' \
		'}' >$@

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
