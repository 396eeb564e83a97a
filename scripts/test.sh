#!/usr/bin/env bash
# The whole test suite from a fresh machine: install, start every service, check, then pytest.
# Extra arguments go to pytest (e.g. scripts/test.sh tests/unit -x).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh
eval "$(scripts/services.sh up postgres redis)"
# The local cluster's binaries (Kubernetes, etcd, kwok), built once into ~/.cache; the tests'
# `devcluster` fixture starts the cluster itself.
.venv/bin/python -m devcluster build

echo "== lint and checks" >&2
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python manage.py check
.venv/bin/python manage.py makemigrations --check --dry-run

echo "== tests" >&2
exec .venv/bin/pytest "$@"
