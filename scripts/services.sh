#!/usr/bin/env bash
# Start or stop the portal's private PostgreSQL and Redis (Debian's packages), on their own ports
# and data directories so they never collide with servers a developer already runs.
#   scripts/services.sh up [postgres] [redis] -> prints `export DATABASE_URL=...` and `export CELERY_BROKER_URL=...`
#   scripts/services.sh down  -> stops both
# Progress goes to stderr, so `eval "$(scripts/services.sh up)"` works.
set -euo pipefail

STATE="${PORTAL_SERVICES_STATE:-/tmp/gpuportal-services}"
PG_PORT="${PORTAL_PG_PORT:-15432}"
REDIS_PORT="${PORTAL_REDIS_PORT:-16379}"
PG_BIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"

log() { echo "services: $*" >&2; }

as_pg() {
  # initdb and postgres refuse to run as root: use the postgres account Debian's package made.
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_up() {
  [ -x "$PG_BIN/pg_ctl" ] || { log "PostgreSQL is not installed (apt-get install postgresql)"; exit 1; }
  mkdir -p "$STATE"
  if [ ! -s "$STATE/pg/PG_VERSION" ]; then
    log "initialising PostgreSQL in $STATE/pg"
    mkdir -p "$STATE/pg"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$STATE/pg" && chmod 755 "$STATE"
    as_pg "$PG_BIN/initdb" -D "$STATE/pg" -U portal -A trust -E UTF8 --no-locale >/dev/null
  fi
  if as_pg "$PG_BIN/pg_ctl" -D "$STATE/pg" status >/dev/null 2>&1; then
    log "PostgreSQL already running on port $PG_PORT"
  else
    log "starting PostgreSQL on 127.0.0.1:$PG_PORT"
    as_pg "$PG_BIN/pg_ctl" -D "$STATE/pg" -l "$STATE/pg/server.log" -w -t 60 start \
      -o "-p $PG_PORT -k /tmp -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" >/dev/null
  fi
  if ! as_pg "$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U portal -d postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname='portal'" | grep -q 1; then
    as_pg "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U portal portal
  fi
}

redis_up() {
  command -v redis-server >/dev/null || { log "Redis is not installed (apt-get install redis-server)"; exit 1; }
  mkdir -p "$STATE/redis"
  if redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; then
    log "Redis already running on port $REDIS_PORT"
  else
    log "starting Redis on 127.0.0.1:$REDIS_PORT"
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$STATE/redis" --daemonize yes \
      --pidfile "$STATE/redis.pid" --logfile "$STATE/redis.log" --save "" --appendonly no
    for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  fi
}

command="${1:-}"
shift || true
wanted="${*:-postgres redis}"
case "$command" in
  up)
    for service in $wanted; do
      case "$service" in
        postgres)
          pg_up
          echo "export DATABASE_URL=postgres://portal@127.0.0.1:$PG_PORT/portal"
          ;;
        redis)
          redis_up
          echo "export CELERY_BROKER_URL=redis://127.0.0.1:$REDIS_PORT/0"
          ;;
        *) echo "unknown service: $service" >&2; exit 2 ;;
      esac
    done
    ;;
  down)
    if [ -s "$STATE/pg/PG_VERSION" ]; then
      as_pg "$PG_BIN/pg_ctl" -D "$STATE/pg" -m fast stop >/dev/null 2>&1 || true
    fi
    redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
    log "stopped"
    ;;
  *)
    echo "usage: $0 up|down [postgres] [redis]" >&2
    exit 2
    ;;
esac
