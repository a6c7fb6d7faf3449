# zaqar-filtering developer entry points.
#
#   make venv    create .venv (Python >= 3.11) with the package and test tools
#   make test    run the unit and functional tests with stestr, tempest
#                (tools/tempest_run.py; TEMPEST=0 leaves it out) and the style
#                checks (flake8 with hacking), and print a one-line summary
#   make services  install what the functional tests and the demo run
#                (redis-server, msmtp, a Java 17+ runtime for Spark) when
#                it is missing
#   make lint    run only the style checks
#   make docs    build the documentation (doc/, with the sample config),
#                the API reference (api-ref/) and the release notes, with
#                warnings as errors, and run "reno lint"
#   make demo    run the CMQ scenarios through a real zaqar-filtering-server
#   make bench   run the matcher benchmark
#   make bench-backfill  run the backfill job benchmark (Spark local[2],
#                100,000 and 1,000,000 generated subscriptions)
#   make clean   remove the virtualenv, test and build output

SHELL := /bin/bash

VENV := .venv
BIN := $(VENV)/bin
# Rebuilt whenever the packaging or the requirements change.
STAMP := $(VENV)/.installed

# Extra arguments for "stestr run", e.g. make test TESTARGS=tests.unit.policy
TESTARGS ?=

# make test also runs tempest (tools/tempest_run.py: Keystone, redis and
# zaqar-filtering-server with Keystone auth; our tempest plugin and
# zaqar-tempest-plugin's v2 tests), counted in the summary. TEMPEST=0 leaves
# it out, and says so.
TEMPEST ?= 1

# pbr takes the version from git. Outside a git work tree (a source tarball,
# an exported copy) it cannot, and needs PBR_VERSION instead.
ifneq ($(shell git rev-parse --is-inside-work-tree 2>/dev/null),true)
export PBR_VERSION ?= 0.0.1.dev0
endif

.PHONY: venv services test lint demo bench bench-backfill clean docs

venv: $(STAMP)

$(STAMP): setup.py setup.cfg requirements.txt test-requirements.txt
	@py=; \
	for cand in python3 python3.11 python3.12 python3.13; do \
	  if command -v "$$cand" >/dev/null 2>&1 && \
	     "$$cand" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then \
	    py=$$cand; break; \
	  fi; \
	done; \
	if [ -z "$$py" ]; then \
	  echo "make venv: Python 3.11 or newer is required;" \
	       "none of python3, python3.11, python3.12, python3.13 is (python3 is" \
	       "$$(python3 --version 2>&1 || echo missing))." >&2; \
	  exit 1; \
	fi; \
	if ! $(BIN)/python -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then \
	  rm -rf $(VENV); \
	  echo "Creating $(VENV) with $$py ($$($$py --version 2>&1))"; \
	  "$$py" -m venv $(VENV) || exit 1; \
	fi
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e . -r test-requirements.txt
	@touch $@

# The functional tests and the demo start their own redis-server on a free
# port (nothing is left running). Install it with apt when it is missing:
# as root only, and only the package, whose service is not left running.
# The Spark tests need a Java runtime (17 or newer): when "java" is missing,
# the newest Debian openjdk-N-jre-headless with N >= 17 is installed.
services:
	@missing=; \
	for pair in redis-server:redis-server msmtp:msmtp; do \
	  command -v "$${pair%%:*}" >/dev/null 2>&1 || missing="$$missing $${pair#*:}"; \
	done; \
	need_java=; \
	command -v java >/dev/null 2>&1 || need_java=1; \
	if [ -z "$$missing" ] && [ -z "$$need_java" ]; then \
	  exit 0; \
	fi; \
	if [ -n "$$need_java" ]; then \
	  echo "make services: java is missing; the Spark tests need a Java" \
	       "runtime 17 or newer"; \
	  missing="$$missing java"; \
	fi; \
	if ! command -v apt-get >/dev/null 2>&1; then \
	  echo "make services: missing:$$missing, and apt-get is not" \
	       "available; install them yourself (redis-server 7.0 or newer)." >&2; \
	  exit 1; \
	fi; \
	if [ "$$(id -u)" -ne 0 ]; then \
	  echo "make services: missing:$$missing; installing needs root: run" \
	       "'sudo apt-get install$$missing', or 'sudo make services'." >&2; \
	  exit 1; \
	fi; \
	running_before=$$(pgrep -x redis-server 2>/dev/null || true); \
	apt-get update -qq || { echo "make services: apt-get update failed" >&2; \
	  exit 1; }; \
	if [ -n "$$need_java" ]; then \
	  jre=$$(apt-cache search --names-only '^openjdk-[0-9]+-jre-headless$$' | \
	    sed -nE 's/^openjdk-([0-9]+)-jre-headless .*/\1/p' | \
	    awk '$$1 >= 17' | sort -n | tail -n 1); \
	  if [ -z "$$jre" ]; then \
	    echo "make services: no openjdk-N-jre-headless with N >= 17 in" \
	         "the apt sources; install a Java 17+ runtime yourself." >&2; \
	    exit 1; \
	  fi; \
	  missing="$${missing/ java/} openjdk-$$jre-jre-headless"; \
	fi; \
	echo "make services: installing$$missing:" \
	     "apt-get install -y -qq$$missing"; \
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing \
	  || { echo "make services: installing$$missing failed" >&2; exit 1; }; \
	if [ -z "$$running_before" ] && pgrep -x redis-server >/dev/null 2>&1; then \
	  echo "make services: stopping the redis-server service the package" \
	       "started (the tests start their own)"; \
	  service redis-server stop >/dev/null 2>&1 || \
	    systemctl stop redis-server >/dev/null 2>&1 || true; \
	fi; \
	for command in redis-server msmtp java; do \
	  command -v $$command >/dev/null 2>&1 || { \
	    echo "make services: $$command is still not on PATH" >&2; exit 1; }; \
	done; \
	echo "make services: $$(redis-server --version)"; \
	echo "make services: $$(java -version 2>&1 | head -n 1)"

# stestr keeps going after a failing test; the summary is read back from the
# run it recorded. A run that fails before any test starts (an import error
# during discovery) records nothing, so "stestr last" would show an older
# run: count the recorded runs to tell the two apart. ("history list" prints
# one "<id> <passed> <runtime> <date>" line per run, and an error message
# instead when there is no repository yet.)
lint: venv
	$(BIN)/flake8

test: venv services
	@lint_rc=0; \
	$(BIN)/flake8 || { lint_rc=$$?; echo "style checks (flake8) failed: see above" >&2; }; \
	runs_before=$$($(BIN)/stestr history list -f value 2>/dev/null | grep -cE '^[0-9]+ '); \
	rc=0; \
	$(BIN)/stestr run $(TESTARGS) || rc=$$?; \
	runs_after=$$($(BIN)/stestr history list -f value 2>/dev/null | grep -cE '^[0-9]+ '); \
	if [ "$$runs_after" -le "$$runs_before" ]; then \
	  echo >&2; \
	  echo "stestr recorded no test run (exit status $$rc); see the errors above." >&2; \
	  echo "0 passed, 0 failed, 0 skipped"; \
	  exit 1; \
	fi; \
	tempest_subunit=$$(mktemp); \
	if [ "$(TEMPEST)" != 0 ]; then \
	  $(BIN)/python tools/tempest_run.py --subunit "$$tempest_subunit" || \
	    { echo "tempest run failed: see above" >&2; [ "$$rc" -ne 0 ] || rc=1; }; \
	else \
	  echo "tempest run left out (TEMPEST=0)" >&2; \
	fi; \
	stats=$$({ $(BIN)/stestr last --subunit; cat "$$tempest_subunit"; } | \
	  $(BIN)/subunit-stats --no-passthrough); \
	rm -f "$$tempest_subunit"; \
	total=$$(awk '/^Total tests:/ {print $$3}' <<<"$$stats"); \
	passed=$$(awk '/^Passed tests:/ {print $$3}' <<<"$$stats"); \
	failed=$$(awk '/^Failed tests:/ {print $$3}' <<<"$$stats"); \
	skipped=$$(awk '/^Skipped tests:/ {print $$3}' <<<"$$stats"); \
	if [ -z "$$total" ] || [ -z "$$passed" ] || [ -z "$$failed" ] || [ -z "$$skipped" ]; then \
	  echo "could not read the subunit-stats summary:" >&2; \
	  echo "$$stats" >&2; \
	  exit 1; \
	fi; \
	echo "$$passed passed, $$failed failed, $$skipped skipped"; \
	if [ "$$total" -eq 0 ]; then \
	  echo "no tests ran" >&2; \
	  exit 1; \
	fi; \
	if [ "$$rc" -eq 0 ] && [ "$$lint_rc" -ne 0 ]; then rc=$$lint_rc; fi; \
	exit $$rc

# The documentation tools (doc/requirements.txt) go into the same .venv:
# oslo_config.sphinxconfiggen needs the package and its options importable.
DOCS_STAMP := $(VENV)/.docs-installed

$(DOCS_STAMP): $(STAMP) doc/requirements.txt
	$(BIN)/python -m pip install --quiet -r doc/requirements.txt
	@touch $@

SPHINX_BUILD = $(BIN)/sphinx-build -a -E -W --keep-going -b html

docs: $(DOCS_STAMP)
	rm -rf doc/build api-ref/build releasenotes/build
	$(SPHINX_BUILD) -d doc/build/doctrees doc/source doc/build/html
	$(SPHINX_BUILD) -d api-ref/build/doctrees api-ref/source api-ref/build/html
	$(SPHINX_BUILD) -d releasenotes/build/doctrees releasenotes/source \
	  releasenotes/build/html
	$(BIN)/reno lint
	@echo "docs: doc/build/html, api-ref/build/html, releasenotes/build/html"

demo: venv services
	$(BIN)/python tools/demo.py

bench: venv
	$(BIN)/python bench/matcher.py

bench-backfill: venv
	$(BIN)/python bench/backfill.py

clean:
	rm -rf $(VENV) .stestr .hypothesis .tox build dist .eggs *.egg-info \
	  AUTHORS ChangeLog bench/results \
	  releasenotes/build api-ref/build doc/build
	find . -path ./.git -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
