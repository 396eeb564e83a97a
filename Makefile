# The README's commands. `make demo` runs the portal; `make test` runs the whole suite.
.PHONY: demo test bench lint format services-up services-down devcluster-up devcluster-down

demo:
	scripts/demo.sh

test:
	scripts/test.sh

bench:
	scripts/bench.sh

lint:
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

format:
	.venv/bin/ruff check --fix .
	.venv/bin/ruff format .

services-up:
	@scripts/services.sh up

services-down:
	@scripts/services.sh down
