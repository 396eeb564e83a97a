#!/usr/bin/env bash
# Benchmarks (not tests): each writes its results under bench-results/.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh
eval "$(scripts/services.sh up postgres redis)"
# A scratch database of its own, so benchmark rows never meet the tests' or the demo's.
export DATABASE_URL="${DATABASE_URL%/*}/portal_bench"
psql "${DATABASE_URL%/*}/postgres" -qtAc "SELECT 1 FROM pg_database WHERE datname='portal_bench'" \
  | grep -q 1 || psql "${DATABASE_URL%/*}/postgres" -qc "CREATE DATABASE portal_bench"
.venv/bin/python manage.py migrate --noinput -v0
# Measure as production runs: DEBUG off (it logs every query).
export DJANGO_DEBUG=0 DJANGO_SECRET_KEY=bench-only-secret

.venv/bin/python tests/bench/bench_quota_requests_api.py
.venv/bin/python tests/bench/bench_reconcile.py
.venv/bin/python tests/bench/bench_monitoring.py
.venv/bin/python tests/bench/bench_gpujobs.py
.venv/bin/python tests/bench/bench_serving.py
