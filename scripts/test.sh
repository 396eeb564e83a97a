#!/usr/bin/env bash
# The whole test suite from a fresh machine: install, start every service, check, then pytest on
# PostgreSQL (tests/conftest.py refuses any other database for this run).
#
# With --fast: the quick loop. No install and no service: pytest --fast runs every test that needs
# neither PostgreSQL, Redis, a worker, the devcluster, Prometheus nor a browser, on SQLite in memory,
# on every core when pytest-xdist is installed.
#
# Extra arguments go to pytest (e.g. scripts/test.sh tests/unit -x, scripts/test.sh --fast -x).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--fast" ]; then
  shift
  if [ ! -x .venv/bin/pytest ]; then
    echo "test: no .venv yet; run scripts/bootstrap.sh (or make test) once" >&2
    exit 1
  fi
  # Keep the compiled modules (and pytest's rewritten test modules) between runs, whatever the
  # shell says: compiling them again is a fifth of the loop's CPU.
  unset PYTHONDONTWRITEBYTECODE
  # Both cores (all of them): with pytest-xdist, one worker per core, each on its own SQLite in
  # memory. Without it the loop runs in one process. A later -n (-n 0: one process) wins.
  workers=()
  if .venv/bin/python -c "import xdist" 2>/dev/null; then
    workers=(-n auto)
  fi
  exec .venv/bin/pytest --fast "${workers[@]}" "$@"
fi

scripts/bootstrap.sh
eval "$(scripts/services.sh up postgres redis)"
# Django's cache in Redis, as in production: the suite proves pages are warm across processes.
export DJANGO_CACHE_URL="${DJANGO_CACHE_URL:-${CELERY_BROKER_URL%/*}/1}"
# The local cluster's binaries (Kubernetes, etcd, kwok), built once into ~/.cache; the tests'
# `devcluster` fixture starts the cluster itself.
.venv/bin/python -m devcluster build
# The single sign-on tests' OpenID provider (Keycloak, from Maven Central), fetched and built once
# into ~/.cache/gpuportal-keycloak; the tests' `keycloak` fixture starts it.
.venv/bin/python -m devcluster keycloak-build

echo "== lint and checks" >&2
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python manage.py check
.venv/bin/python manage.py makemigrations --check --dry-run

echo "== tests" >&2
exec .venv/bin/pytest "$@"
