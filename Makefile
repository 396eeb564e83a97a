# The README's commands. `make demo` runs the portal; `make test` runs the whole suite;
# `make test-fast` runs every test that needs no service, on SQLite in memory, in seconds;
# `make test-abuse` the bad-input suites the same way, in minutes.
.PHONY: demo test test-fast test-abuse bench bench-scale lint format docs docs-screenshots services-up services-down devcluster-build keycloak-build devcluster-up devcluster-down

demo:
	scripts/demo.sh

test:
	scripts/test.sh

test-fast:
	scripts/test.sh --fast

# The bad-input suites (schemathesis, the nasty-input corpus) on SQLite, no services: minutes.
test-abuse:
	scripts/test.sh --fast -m abuse

bench:
	scripts/bench.sh

# The benchmarks again at a company's scale (5,000 GPUs, 500 teams, 200,000 jobs: tests/bench/
# scale.py), into bench-results/scale.md and the summary beside the lab's rows. Hours; not in CI.
bench-scale:
	scripts/bench.sh --scale

lint:
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

format:
	.venv/bin/ruff check --fix .
	.venv/bin/ruff format .

# The documentation site (docs/, mkdocs.yml) into site/: the configuration reference written
# again from portal/settings.py, then a strict build (a missing page, link or anchor fails).
docs:
	.venv/bin/python scripts/settings_reference.py
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict

# The docs' screenshots (docs/screenshots/*.png), taken again by the browser tests: what
# `make test` needs for tests/e2e (the devcluster, Chromium, Keycloak) is built and started first.
docs-screenshots:
	E2E_SCREENSHOT_DIR="$(CURDIR)/docs/screenshots" scripts/test.sh tests/e2e

services-up:
	@scripts/services.sh up

services-down:
	@scripts/services.sh down

# Progress goes to stderr and only `export ...` lines to stdout: eval "$(make -s devcluster-up)"
devcluster-build:
	.venv/bin/python -m devcluster build

keycloak-build:
	.venv/bin/python -m devcluster keycloak-build

devcluster-up:
	@.venv/bin/python -m devcluster up

devcluster-down:
	@.venv/bin/python -m devcluster down
