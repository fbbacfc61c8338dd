# The two commands of the README: `make demo` and `make test`. Both set up .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CONFORMANCE ?= ../shared/conformance

.PHONY: demo test lint bench soak client clean

# The npm reference MCP servers and the TypeScript SDK client the gateway's interop tests drive,
# pinned by package-lock.json (installed again whenever the lock file is newer). Without node the
# tests that need it skip, saying so.
NODE_STAMP := node_modules/.package-lock.json
$(NODE_STAMP): package-lock.json
	@if command -v npm >/dev/null 2>&1; then npm ci --no-audit --no-fund --loglevel=error && touch $(NODE_STAMP); \
	else echo "npm not found: run npm ci before the gateway's interop tests (they skip only without node)"; fi

# Exact versions from the lock file; the package itself declares ranges (see requirements-lock.txt).
$(STAMP): pyproject.toml requirements-lock.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip uninstall -q -y reversi 2>/dev/null || true  # the distribution's name before reversi-undo
	rm -rf src/reversi.egg-info
	$(BIN)/python -m pip install -q -c requirements-lock.txt -e '.[dev]'
	touch $(STAMP)

# The demo runs an agent through the gateway on files in demo-shop/files/ and rows in demo-shop/shop.db,
# rolls it back, then serves the console over the journal (no keys: loopback only) with the connectors
# as compensator and reader, set to the demo's shop, so its fs and sql steps can be rolled back from the
# browser. Its Stripe, Slack and mail fakes live only while `reversi demo` runs: those steps cannot.
DEMO_PORT ?= 8080
DEMO_SHOP := $(CURDIR)/demo-shop

demo: $(STAMP)
	$(BIN)/reversi demo
	REVERSI_COMPENSATOR_CMD="$(CURDIR)/$(BIN)/reversi-connectors compensate" \
	REVERSI_READER_CMD="$(CURDIR)/$(BIN)/reversi-connectors read" \
	REVERSI_FS_ROOT="$(DEMO_SHOP)/files" REVERSI_SQL_URL="sqlite:///$(DEMO_SHOP)/shop.db" \
	REVERSI_CONNECTOR_DIR="$(CURDIR)/.reversi/connectors" \
	$(BIN)/reversi-server --db sqlite:///.reversi/reversi.db -m .reversi/demo/tools.yaml --port $(DEMO_PORT)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

# The contract suite sits beside this repository in CI only: a fresh clone runs without it.
test: lint $(NODE_STAMP)
	$(BIN)/python -m pytest tests -q -n 2
	@if [ -d "$(CONFORMANCE)" ]; then \
		echo "$(BIN)/python -m pytest $(CONFORMANCE) -q -n 2"; $(BIN)/python -m pytest "$(CONFORMANCE)" -q -n 2; \
	else \
		echo "conformance suite not found at $(CONFORMANCE): skipped (set CONFORMANCE=DIR to run it)"; \
	fi

bench: $(STAMP)
	$(BIN)/python -m bench

# The long fault campaign, then the state machine with many examples, the hostile-input fuzzers with
# FUZZ examples each and the store-fault tests, with a tally of what was tried (docs/reliability.md).
# SEED=N runs that one seed again, as a failure says to. PostgreSQL seeds need REVERSI_TEST_PG_URL.
SEEDS ?= 2000
FUZZ ?= 300
TALLY := .reversi/soak-tally.jsonl
soak: $(STAMP) $(NODE_STAMP)
ifdef SEED
	$(BIN)/python -m tests.reliability.soak --seed $(SEED)
else
	$(BIN)/python -m tests.reliability.soak --seeds $(SEEDS)
	$(BIN)/python -m pytest tests/reliability/test_state_machine.py -q -n 2 --hypothesis-profile=soak
	mkdir -p .reversi && rm -f $(TALLY)
	REVERSI_FUZZ_EXAMPLES=$(FUZZ) REVERSI_FUZZ_TALLY=$(CURDIR)/$(TALLY) $(BIN)/python -m pytest tests/hostile tests/faults -q -n 2
	$(BIN)/python -m tests.hostile.fuzz $(TALLY)
endif

# The TypeScript client's OpenAPI document and types, made again from the server's endpoints after an API
# change (tests/server/test_typescript_client.py fails until they are current).
client: $(STAMP)
	$(BIN)/python -c "import json; from reversi.server.api import ENDPOINTS; \
	from reversi.server.openapi import openapi_document as doc; \
	open('clients/typescript/openapi.json', 'w').write(json.dumps(doc(ENDPOINTS), indent=2))"
	cd clients/typescript && npm ci --no-audit --no-fund --loglevel=error && npm run schema

clean:
	rm -rf $(VENV) .reversi build *.egg-info src/*.egg-info
