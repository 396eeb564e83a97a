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

scripts/bootstrap.sh --for-tests
eval "$(scripts/services.sh up postgres redis)"
# Django's cache in Redis, as in production: the suite proves pages are warm across processes.
export DJANGO_CACHE_URL="${DJANGO_CACHE_URL:-${CELERY_BROKER_URL%/*}/1}"

# What is built once into ~/.cache: the local cluster's binaries (Kubernetes, etcd, kwok, Kueue,
# Helm, and the real node's containerd, Traefik and local-path-provisioner; the tests'
# `devcluster` fixture starts the cluster itself), the single sign-on tests' OpenID provider
# (Keycloak, from Maven Central; the `keycloak` fixture starts it), the portal's image and the
# notebook image (buildah on a Debian base; their layers are kept in podman's store).
build() {
  .venv/bin/python -m devcluster build && .venv/bin/python -m devcluster keycloak-build \
    && .venv/bin/python -m devcluster image && .venv/bin/python -m devcluster image --notebook
}
# The tests that need what `build` makes (their markers come from the fixtures they use).
NEEDS_BUILD="devcluster or helm or keycloak or containers"

checks() {
  echo "== lint and checks" >&2
  .venv/bin/ruff check .
  .venv/bin/ruff format --check .
  .venv/bin/python manage.py check
  .venv/bin/python manage.py makemigrations --check --dry-run
}

if [ $# -gt 0 ]; then
  # A part of the suite: build first, then pytest with those arguments.
  build
  checks
  echo "== tests" >&2
  exec .venv/bin/pytest "$@"
fi

# The whole suite. On a fresh machine the build takes many minutes of compiling, and most of the
# suite needs none of it: those tests run meanwhile, the rest once the build is done. Where the
# build is cached it is done at once, and the two parts run one after the other.
build_log="$(mktemp -t gpuportal-build.XXXXXX)"
# In a process group of its own, so that stopping early stops the compilers too.
export -f build
setsid --wait bash -c build > "$build_log" 2>&1 &
build_pid=$!
trap 'kill -- "-$build_pid" 2>/dev/null || true' EXIT
checks
status=0
echo "== tests needing no build (while the build runs: $build_log)" >&2
.venv/bin/pytest -m "not ($NEEDS_BUILD)" || status=$?
echo "== waiting for the build" >&2
if ! wait "$build_pid"; then
  cat "$build_log" >&2
  echo "test: the build failed (above); the tests that need it did not run" >&2
  exit 1
fi
tail -n 3 "$build_log" >&2
echo "== tests needing the build" >&2
.venv/bin/pytest -m "$NEEDS_BUILD" || status=$?
exit "$status"
