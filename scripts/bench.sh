#!/usr/bin/env bash
# Benchmarks (not tests): each writes its results under bench-results/ and its rows for the
# summary table; the last step renders them into bench-results/SUMMARY.md (tests/bench/summary.py),
# also after a benchmark failed, with the rows recorded until then.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh
eval "$(scripts/services.sh up postgres redis)"
# A scratch database of its own, so benchmark rows never meet the tests' or the demo's.
export DATABASE_URL="${DATABASE_URL%/*}/portal_bench"
psql "${DATABASE_URL%/*}/postgres" -qtAc "SELECT 1 FROM pg_database WHERE datname='portal_bench'" \
  | grep -q 1 || psql "${DATABASE_URL%/*}/postgres" -qc "CREATE DATABASE portal_bench"
.venv/bin/python manage.py migrate --noinput -v0
# Measure as production runs: DEBUG off (it logs every query), Django's cache in Redis (a Redis
# database of the benchmarks' own: they empty it to measure cold pages).
export DJANGO_DEBUG=0 DJANGO_SECRET_KEY=bench-only-secret
# ... behind its TLS proxy: the benchmarks' clients speak plain HTTP to Django, as the proxy does.
export DJANGO_SECURE_SSL_REDIRECT=0
export DJANGO_CACHE_URL="${CELERY_BROKER_URL%/*}/2"

mkdir -p bench-results
rm -f bench-results/summary.jsonl
trap '.venv/bin/python tests/bench/summary.py' EXIT

.venv/bin/python tests/bench/bench_api_lists.py
.venv/bin/python tests/bench/bench_calendar.py
.venv/bin/python tests/bench/bench_statements.py
.venv/bin/python tests/bench/bench_reconcile.py
.venv/bin/python tests/bench/bench_monitoring.py
.venv/bin/python tests/bench/bench_gpujobs.py
.venv/bin/python tests/bench/bench_watcher_memory.py
.venv/bin/python tests/bench/bench_kueue.py
.venv/bin/python tests/bench/bench_serving.py
.venv/bin/python tests/bench/bench_web_load.py
