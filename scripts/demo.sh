#!/usr/bin/env bash
# The demo: the portal on embedded defaults (SQLite), with a private Redis, a Celery worker, one
# for webhook deliveries and beat, the job watcher and the local GPU cluster, seeded so that it
# looks in use: two teams with grants and requests in the review queue, a week of GPU history, an
# idle-GPU notice, jobs that finish and one that keeps running. Ctrl-C stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."

PORT="${PORTAL_PORT:-8000}"
STATE=".state/demo"
mkdir -p "$STATE"

scripts/bootstrap.sh
unset DATABASE_URL  # the demo's database is the embedded SQLite file
eval "$(scripts/services.sh up redis)"

# The demo's cluster is the local GPU cluster (built on first use, then started in seconds).
cluster_was_running=0
.venv/bin/python -m devcluster status >/dev/null 2>&1 && cluster_was_running=1
eval "$(.venv/bin/python -m devcluster up)"
pids=()
stop() {
  trap - EXIT INT TERM
  if [ ${#pids[@]} -gt 0 ]; then kill "${pids[@]}" 2>/dev/null || true; fi
  if [ "$cluster_was_running" = 0 ]; then .venv/bin/python -m devcluster down || true; fi
}
trap stop EXIT INT TERM

.venv/bin/python manage.py migrate --noinput -v0
# The portal as a company installs it: deploy/'s RBAC, team roles and confinement, and the portal
# acting as its ServiceAccount (its least-privilege, confined identity), not as the cluster admin.
portal_kubeconfig="$(.venv/bin/python -m devcluster install-portal --output "$STATE/portal.kubeconfig")"
.venv/bin/python manage.py seed_demo --kubeconfig "$portal_kubeconfig" --prometheus-url "$PROMETHEUS_URL"
# The jobs wait in Redis for the worker started below.
.venv/bin/python manage.py seed_demo_jobs
# A week of GPU history for the teams' pods (only what is missing since the last run), then an
# idle check now: it finds the history's idle notebook and notifies its team's leads. Prometheus
# is restarted to load the history at once, unless the cluster was running already (it may be
# serving tests): then the history waits for Prometheus' own reload, within a minute.
history_options=""
[ "$cluster_was_running" = 1 ] && history_options="--no-restart"
.venv/bin/python -m devcluster.demo_history $history_options
.venv/bin/python manage.py check_idle_gpus

.venv/bin/celery -A portal worker --pool=solo --loglevel=INFO -n worker@%h >"$STATE/worker.log" 2>&1 &
pids+=($!)
# Webhook deliveries have a queue of their own, read by a worker of their own: a slow receiver
# never delays a reconcile or the removal of access.
.venv/bin/celery -A portal worker --pool=solo -Q "${WEBHOOKS_QUEUE:-webhooks}" --loglevel=INFO -n webhooks@%h >"$STATE/webhook-worker.log" 2>&1 &
pids+=($!)
.venv/bin/celery -A portal beat --loglevel=INFO >"$STATE/beat.log" 2>&1 &
pids+=($!)
.venv/bin/python manage.py watch_jobs >"$STATE/watcher.log" 2>&1 &
pids+=($!)
# The cluster may be newer than the demo's database (the tests start it afresh): bring every
# team's namespace, quota and access in line now rather than at the first periodic sweep.
.venv/bin/celery -A portal call tenants.tasks.reconcile_sweep >/dev/null

cat <<MSG

  GPU portal demo: open http://127.0.0.1:$PORT/
  Sign in as   admin / gpu-portal-demo   (portal admin: review queue, approvals)
               lena  / gpu-portal-demo   (lead of team vision)
               otto  / gpu-portal-demo   (lead of team speech)
  First look:  /monitoring/teams/vision/ and /jobs/ as lena; /review/, /monitoring/clusters/devcluster/
               and /monitoring/usage/ as admin
  API docs:    http://127.0.0.1:$PORT/api/v1/docs/
  Cluster:     export KUBECONFIG=$KUBECONFIG   (kubectl: $(.venv/bin/python -c "from devcluster import builder; print(builder.bin_dir())")/kubectl)
               a member's own: .venv/bin/python -m devcluster mint portal:lena  (the team roles, as in a company)
  Prometheus:  $PROMETHEUS_URL
  Logs:        $STATE/  (worker.log, webhook-worker.log, beat.log, watcher.log)    Stop with Ctrl-C.

MSG
# The ASGI application, as in production (a followed job log streams on the event loop).
.venv/bin/python -m uvicorn portal.asgi:application --host 127.0.0.1 --port "$PORT"
