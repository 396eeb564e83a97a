#!/usr/bin/env bash
# Benchmarks (not tests): each writes its results under bench-results/ and its rows for the
# summary table; the last step renders them into bench-results/SUMMARY.md (tests/bench/summary.py),
# also after a benchmark failed, with the rows recorded until then.
#
# scripts/bench.sh                      every benchmark: the lab's rows are made afresh
# scripts/bench.sh web_load monitoring  only these (tests/bench/bench_<name>.py): their rows
#                                       replace their previous ones, the others' stay; say
#                                       how the copy was made in bench-results/PROVENANCE.md
# scripts/bench.sh --scale [NAME...]    `make bench-scale`: those that run at a company's scale
#                                       (tests/bench/scale.py), at that scale; their rows go
#                                       beside the lab's, and into bench-results/scale.md; say
#                                       how in bench-results/PROVENANCE-scale.md
set -euo pipefail
cd "$(dirname "$0")/.."

scale=""
if [ "${1:-}" = "--scale" ]; then
  scale=1
  shift
fi

# Those that run pods on simulated nodes of their own (gpujobs, serving, kueue) do so under portal
# names of their own: the admission policies that reconciling teams under the default name
# (reconcile, monitoring) installs on the shared devcluster refuse GPU pods placed off
# `hardware-type=gpu`, as the benchmarks' own nodes are, but only in that name's namespaces.
ALL="api_lists calendar statements gpujobs serving watcher_memory kueue gpu_sharing reconcile monitoring web_load"
[ -z "$scale" ] || ALL="$(python3 tests/bench/scale.py benchmarks)"
benchmarks="${*:-$ALL}"
for name in $benchmarks; do
  [ -f "tests/bench/bench_$name.py" ] || { echo "bench: no benchmark $name (one of: $ALL)" >&2; exit 2; }
done

scripts/bootstrap.sh
eval "$(scripts/services.sh up postgres redis)"
# A scratch database of its own, so benchmark rows never meet the tests' or the demo's.
export DATABASE_URL="${DATABASE_URL%/*}/portal_bench"
psql "${DATABASE_URL%/*}/postgres" -qtAc "SELECT 1 FROM pg_database WHERE datname='portal_bench'" \
  | grep -q 1 || psql "${DATABASE_URL%/*}/postgres" -qc "CREATE DATABASE portal_bench"
.venv/bin/python manage.py migrate --noinput -v0
# Measure as production runs: the image's environment (DEBUG off, as DEBUG logs every query; a
# pool of database connections per process), Django's cache in Redis (a Redis database of the
# benchmarks' own: they empty it to measure cold pages). Not its PATH: the image's virtual
# environment is /opt/venv, the benchmarks run from .venv.
eval "$(.venv/bin/python -c 'import shlex
from tests.dockerfile import dockerfile_environment
for name, value in dockerfile_environment().items():
    if name != "PATH": print(f"export {name}={shlex.quote(value)}")')"
export DJANGO_DEBUG=0 DJANGO_SECRET_KEY=bench-only-secret
# ... behind its TLS proxy: the benchmarks' clients speak plain HTTP to Django, as the proxy does.
export DJANGO_SECURE_SSL_REDIRECT=0
export DJANGO_CACHE_URL="${CELERY_BROKER_URL%/*}/2"

mkdir -p bench-results
if [ -n "$scale" ]; then
  # Every benchmark's sizes at that scale, and its rows under the scale's name.
  eval "$(.venv/bin/python tests/bench/scale.py exports)"
  trap '.venv/bin/python tests/bench/summary.py; .venv/bin/python tests/bench/scale.py render' EXIT
else
  # A full run replaces the lab's rows; the company scale's stay (make bench-scale).
  [ $# -gt 0 ] || .venv/bin/python tests/bench/summary.py forget-lab
  trap '.venv/bin/python tests/bench/summary.py' EXIT
fi

for name in $benchmarks; do
  .venv/bin/python "tests/bench/bench_$name.py"
  # The next one should not share the machine with the deletions this one left running.
  .venv/bin/python tests/bench/settle.py
done
