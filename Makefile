# Two commands matter: `make demo` and `make test`. Both set up the venv first.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: setup demo test test-live bench docs clean

setup: $(VENV)/.installed $(VENV)/.native tools/cypher-lint/node_modules/.installed /usr/bin/chromium

# Debian's chromium for the page's browser test (tests/server/test_page.py drives it with Playwright);
# Playwright never downloads a browser of its own. Installed only where it is missing (CI runs as root).
/usr/bin/chromium:
	apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium

# Neo4j's own Cypher parser (npm), which the tests run over every query of graphdb/queries.
tools/cypher-lint/node_modules/.installed: tools/cypher-lint/package.json tools/cypher-lint/package-lock.json
	cd tools/cypher-lint && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# torch==2.13.0 (the CPU build on disk) is pinned in the same pip call as
# everything else: an unpinned torch pulls a multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -e '.[capture,gnn,dev,integrations,neo4j,embed,agent,server,ray]' 'torch==2.13.0'
	@# an editable install writes no bytecode: without it every command would compile the package first
	$(PY) -m compileall -q bottleneck_oracle
	@# the intent examples' and cypher templates' vectors, cached by their text (graphdb/embedding.py): the
	@# first `oracle ask` then needs no model run; an edited example file is embedded anew on first use
	$(PY) -c "from bottleneck_oracle.agent.intents import Slots, classify; from bottleneck_oracle.agent.planner import cypher_call; classify('why is step 3 slow?'); cypher_call('how many ops are there?', Slots())"
	touch $@

# The graph layer's C core (graph/_native.c), which the editable install built in place: built again when
# its source changes, so a pulled change to it needs no new venv.
$(VENV)/.native: bottleneck_oracle/graph/_native.c $(VENV)/.installed
	$(PY) setup.py -q build_ext --inplace
	touch $@

# The shipped example: its analysis, loaded into the embedded graph database, then asked (offline).
demo: setup
	$(VENV)/bin/oracle analyze examples/gpt_2rank
	$(VENV)/bin/oracle ingest examples/gpt_2rank
	$(VENV)/bin/oracle ask "Why is step 5 slow?" --trace examples/gpt_2rank
	$(VENV)/bin/oracle ask "What should I change first?" --trace examples/gpt_2rank

# Tests that train real jobs (marked slow) run alone afterwards: they time steps, and other
# tests running beside them on 2 cores would add noise to those times. Their verdicts depend on
# no timing; the comparisons of real times between live runs (marked live) are `make test-live`.
test: setup
	$(VENV)/bin/pytest -q -n 2 -m "not slow and not live"
	$(VENV)/bin/pytest -q -m "slow and not live"

# By hand, on a quiet machine: what-ifs against a live re-capture, overheads; a failing capture is kept
# under .oracle/failed-captures/ (README: "Live timing tests").
test-live: setup
	$(VENV)/bin/pytest -q -m live

# The pages generated from the code (docs/testing.md): every command's help, and the README tour's output.
docs: setup
	$(PY) tools/gen_commands_doc.py --write
	$(PY) tools/refresh_readme_tour.py

bench: setup
	$(PY) benchmarks/bench_analyze.py
	$(PY) benchmarks/bench_graphdb.py
	$(PY) benchmarks/bench_gnn.py
	$(PY) benchmarks/bench_whatif.py
	$(PY) benchmarks/bench_page.py
	$(PY) benchmarks/bench_ask.py --whole 10

clean:
	rm -rf $(VENV) .oracle .pytest_cache
