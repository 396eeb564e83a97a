#!/usr/bin/env bash
# The demo: the portal on embedded defaults (SQLite), with a private Redis, a Celery worker, one
# for webhook deliveries and beat, the job watcher and the local GPU cluster, seeded so that it
# looks in use: two teams with grants and requests in the review queue, a week of GPU history, an
# idle-GPU notice, jobs that finish and one that keeps running. Ctrl-C stops everything it started.
#
# With the cluster built, all of it is ready before the portal is served, in seconds. Where it is
# not (its first build takes many minutes), the portal is served at once and the cluster is built
# and started in the background: every page shows a notice of how far it is (PORTAL_NOTICE_FILE,
# written by devcluster.demo_notice), and the steps that need the cluster follow once it is up.
# The portal holds its credentials for the cluster from the start, so what needs the cluster
# meanwhile finds it not answering and tries again (task retries, then beat's sweep and resync):
# the seeded jobs wait queued and run, the reconciles catch up, the charts fill in.
#
# For tests: DEMO_STATE (default .state/demo) holds the logs, credentials and notice,
# DEMO_DATABASE_URL names the database (default the embedded SQLite file), PORTAL_PORT the port,
# and DEMO_CLUSTER_WAITS_FOR holds the background cluster step until that file exists.
set -euo pipefail
cd "$(dirname "$0")/.."

PORT="${PORTAL_PORT:-8000}"
STATE="$(realpath -m "${DEMO_STATE:-.state/demo}")"
mkdir -p "$STATE"
NOTICE="$STATE/notice.txt"
REUSED="$STATE/cluster-reused"  # the background `up` found a cluster someone else started
rm -f "$NOTICE" "$REUSED"
export PORTAL_NOTICE_FILE="$NOTICE"
devcluster=(.venv/bin/python -m devcluster)
notice=(.venv/bin/python -m devcluster.demo_notice)

scripts/bootstrap.sh
if [ -n "${DEMO_DATABASE_URL:-}" ]; then
  export DATABASE_URL="$DEMO_DATABASE_URL"
else
  unset DATABASE_URL  # the demo's database is the embedded SQLite file
fi
eval "$(scripts/services.sh up redis)"

# The demo's cluster is the local GPU cluster: built on first use, then started in seconds.
cluster_was_running=0
"${devcluster[@]}" status >/dev/null 2>&1 && cluster_was_running=1
background=1
if [ "$cluster_was_running" = 1 ] || "${devcluster[@]}" build --check --cluster 2>/dev/null; then
  background=0
fi
started="$(date +%s)"

pids=()
cluster_pid=""
stop() {
  trap - EXIT INT TERM
  if [ -n "$cluster_pid" ]; then
    kill -TERM -- "-$cluster_pid" 2>/dev/null || true
    wait "$cluster_pid" 2>/dev/null || true
  fi
  if [ ${#pids[@]} -gt 0 ]; then kill "${pids[@]}" 2>/dev/null || true; fi
  rm -f "$NOTICE"
  if [ "$cluster_was_running" = 0 ] && [ ! -e "$REUSED" ]; then "${devcluster[@]}" down || true; fi
}
trap stop EXIT INT TERM

# What the cluster is doing, on every page while the portal is served without it.
note() {
  if [ "$background" = 1 ]; then "${notice[@]}" step "$NOTICE" --since "$started" "$1"; fi
}

# The steps that need the cluster up (with KUBECONFIG and PROMETHEUS_URL exported by `up`). Each
# step says `|| return`: in the background it runs where bash ignores `set -e`.
with_the_cluster() {
  note "it is up; installing the portal on it"
  # The portal as a company installs it: deploy/'s RBAC, team roles and confinement, and the
  # portal acting as its ServiceAccount (its least-privilege, confined identity), not as the
  # cluster admin.
  portal_kubeconfig="$("${devcluster[@]}" install-portal --output "$STATE/portal.kubeconfig")" || return
  .venv/bin/python manage.py seed_demo --kubeconfig "$portal_kubeconfig" --prometheus-url "$PROMETHEUS_URL" || return
  # The jobs wait in Redis for the worker (submitted once: a second run adds only what is
  # missing).
  .venv/bin/python manage.py seed_demo_jobs || return
  # A week of GPU history for the teams' pods (only what is missing since the last run), then an
  # idle check now: it finds the history's idle notebook and notifies its team's leads.
  # Prometheus is restarted to load the history at once, unless the cluster was running already
  # (it may be serving tests): then the history waits for Prometheus' own reload, within a
  # minute.
  note "it is up; writing a week of GPU history"
  history_options=""
  [ "$cluster_was_running" = 1 ] && history_options="--no-restart"
  .venv/bin/python -m devcluster.demo_history $history_options || return
  .venv/bin/python manage.py check_idle_gpus
}

start_processes() {
  .venv/bin/celery -A portal worker --pool=solo --loglevel=INFO -n worker@%h >"$STATE/worker.log" 2>&1 &
  pids+=($!)
  # Webhook deliveries have a queue of their own, read by a worker of their own: a slow
  # receiver never delays a reconcile or the removal of access.
  .venv/bin/celery -A portal worker --pool=solo -Q "${WEBHOOKS_QUEUE:-webhooks}" --loglevel=INFO -n webhooks@%h >"$STATE/webhook-worker.log" 2>&1 &
  pids+=($!)
  .venv/bin/celery -A portal beat --loglevel=INFO >"$STATE/beat.log" 2>&1 &
  pids+=($!)
  .venv/bin/python manage.py watch_jobs >"$STATE/watcher.log" 2>&1 &
  pids+=($!)
}

# The cluster may be newer than the demo's database (the tests start it afresh): bring every
# team's namespace, quota and access in line now rather than at the first periodic sweep.
catch_up() {
  .venv/bin/celery -A portal call reconcile.tasks.reconcile_sweep >/dev/null
}

# Built in the background: `up` (its progress to the notice), then the steps that need it, then
# the reconcile and the jobs' resync at once rather than at beat's next round.
cluster_in_background() {
  if [ -n "${DEMO_CLUSTER_WAITS_FOR:-}" ]; then
    while [ ! -e "$DEMO_CLUSTER_WAITS_FOR" ]; do
      kill -0 "$$" 2>/dev/null || return 0  # the demo has gone
      sleep 0.2
    done
  fi
  if ! "${devcluster[@]}" up 2>&1 >"$STATE/cluster.env" </dev/null \
      | "${notice[@]}" follow "$NOTICE" --since "$started" >"$STATE/cluster.log"; then
    "${notice[@]}" failed "$NOTICE" "$STATE/cluster.log"
    echo "demo: the cluster did not come up; see $STATE/cluster.log" >&2
    return 1
  fi
  eval "$(cat "$STATE/cluster.env")"
  if grep -q "already running and healthy" "$STATE/cluster.log"; then
    touch "$REUSED"
    cluster_was_running=1
  fi
  if ! with_the_cluster >>"$STATE/cluster.log" 2>&1; then
    "${notice[@]}" failed "$NOTICE" "$STATE/cluster.log"
    echo "demo: setting up the cluster failed; see $STATE/cluster.log" >&2
    return 1
  fi
  catch_up && .venv/bin/celery -A portal call gpujobs.tasks.resync_jobs >/dev/null || return
  rm -f "$NOTICE"
  echo "demo: the cluster is up and the portal uses it (log: $STATE/cluster.log)" >&2
}

.venv/bin/python manage.py migrate --noinput -v0
if [ "$background" = 0 ]; then
  eval "$("${devcluster[@]}" up)"
  with_the_cluster
  start_processes
  catch_up
else
  note "starting the build"
  # Where the cluster will be, and the portal's credentials for it (its CA is made now, and
  # kept by `up`): the cluster is in the demo's database from the start, and whatever needs it
  # finds it not answering yet and tries again, rather than failing for want of an address.
  eval "$("${devcluster[@]}" env --planned)"
  portal_kubeconfig="$("${devcluster[@]}" install-portal --credentials-only --output "$STATE/portal.kubeconfig")"
  # (Its attempt to make the portal's namespace meets no cluster yet: said in seed.log, not here;
  # install-portal makes it later.)
  if ! .venv/bin/python manage.py seed_demo --kubeconfig "$portal_kubeconfig" \
      --prometheus-url "$PROMETHEUS_URL" 2>"$STATE/seed.log"; then
    cat "$STATE/seed.log" >&2
    exit 1
  fi
  .venv/bin/python manage.py seed_demo_jobs
  start_processes
  set -m  # the cluster step in a process group of its own, which stop() ends whole
  cluster_in_background </dev/null &
  cluster_pid=$!
  set +m
fi

building=""
if [ "$background" = 1 ]; then
  building="
  The cluster: being built and started in the background (many minutes the first time); every
               page says how far, and the portal uses it once it is up. Log: $STATE/cluster.log
"
fi
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
$building
MSG
# The ASGI application, as in production (a followed job log streams on the event loop).
.venv/bin/python -m uvicorn portal.asgi:application --host 127.0.0.1 --port "$PORT"
