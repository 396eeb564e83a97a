#!/bin/sh
# Options alone (a pod's `args`, which replace the image's CMD) are JupyterLab's: run it on
# 0.0.0.0:8888 with them. Anything else is a command of its own (`jupyter lab ...`, `bash`).
set -e
case "${1:-}" in
  -*) set -- jupyter lab --ip=0.0.0.0 --port=8888 --no-browser "$@" ;;
esac
exec "$@"
