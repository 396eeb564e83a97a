#!/usr/bin/env bash
# Install what the portal needs on a fresh Debian machine, reusing whatever is already there:
# Debian's packages (only the missing ones), then the virtualenv from the pinned requirements.
# Usage: scripts/bootstrap.sh [--for-tests]
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "bootstrap: $*" >&2; }

PACKAGES="postgresql redis-server chromium prometheus openssl"
# --for-tests: also what builds and runs the portal's image in the tests (no Docker daemon)
# and what the devcluster's real node runs its containers with (runc, the CNI plugins).
if [ "${1:-}" = "--for-tests" ]; then
  PACKAGES="$PACKAGES podman buildah mmdebstrap runc containernetworking-plugins"
fi
missing=""
for package in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" || missing="$missing $package"
done
if [ -n "$missing" ]; then
  log "installing Debian packages:$missing"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q $missing >&2
fi

if [ ! -x .venv/bin/python ]; then
  log "creating the virtualenv in .venv"
  "${PYTHON:-python3}" -m venv .venv
fi
wanted="$(sha256sum requirements.txt | cut -d' ' -f1)"
if [ "$(cat .venv/.requirements.sha256 2>/dev/null)" != "$wanted" ]; then
  log "installing Python packages from requirements.txt"
  .venv/bin/pip install -q --upgrade pip >&2
  .venv/bin/pip install -q -r requirements.txt >&2
  echo "$wanted" > .venv/.requirements.sha256
fi
