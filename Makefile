# Two commands on a fresh machine:  `make demo` (the whole loop end to end)  and  `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The CPU build of torch: an unpinned torch would pull a multi-GB CUDA build.
TORCH  ?= torch==2.13.0

.PHONY: setup demo test lint clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "$(TORCH)"
	$(BIN)/pip install --quiet -e ".[test]"
	touch $@

demo: setup
	HARVEST_BIN=$(BIN) bash scripts/demo.sh

# Two test processes (pytest-xdist), each taking whole files so module fixtures are built once: the
# suite is mostly single-threaded Python (on 2 cores shared with another job: 8.6 min against 13.7 in one).
test: setup
	$(BIN)/python -m pytest -n 2 --dist loadfile

lint: setup
	$(BIN)/pip install --quiet ruff
	$(BIN)/ruff check trajectory_lake value_model reranker_service tests

clean:
	rm -rf $(VENV) .harvest .pytest_cache
