# CBR: `make run` starts everything on embedded defaults; `make test` runs the whole test suite.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python

.PHONY: run test test-quick lint lock bench venv check clean

run: venv check
	$(PY) -m cbrweb.run

# in parallel: four test processes whatever the cores (tests/conftest.py gives each its own Redis
# databases; pytest-django its own test database), a test file's tests all in one of them, the
# longest files handed out first (tests/conftest.py LONG_FILES). Four, not one per core: much of
# the suite waits (on servers it starts, Spark, Redis, timers); on two slow cores, two processes
# kept them busy under half the run (docs/decisions.md, "The suite on a slower machine")
test: venv check
	$(PY) -m pytest -n 4 --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# the layers and no circles (pyproject.toml [tool.importlinter]), ruff's rules and format, mypy, and
# no model change without its migration (test settings on the embedded SQLite: no service needed);
# .pre-commit-config.yaml runs the same, keep the two in step
lint: venv
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	env -u DATABASE_URL DJANGO_SETTINGS_MODULE=cbrweb.settings_test $(PY) manage.py makemigrations --check --dry-run

# the locks, from pyproject.toml: requirements.txt (everything, what `make venv` installs) and
# requirements-runtime.txt (the runtime alone, at the same versions); pins already there are kept
LOCK := $(VENV)/bin/uv pip compile pyproject.toml --universal --python-version 3.11 --quiet --custom-compile-command "make lock"
lock: venv
	$(LOCK) --group dev -o requirements.txt
	$(LOCK) -c requirements.txt -o requirements-runtime.txt

test-quick: venv
	$(PY) -m pytest -m "not integration" $(PYTEST_ARGS)

bench: venv check
	$(PY) bench/publish.py
	$(PY) bench/read.py

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt pyproject.toml client/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "cbr: Python 3.11 or newer is needed; $(PYTHON) is " + sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements.txt
	$(VENV)/bin/pip install --quiet --no-deps --no-build-isolation -e .
	$(VENV)/bin/pip install --quiet --no-deps --no-build-isolation -e client
	@touch $@

check:
	@$(PY) -m cbrweb.prereq

clean:
	rm -rf $(VENV) var .pytest_cache .hypothesis
