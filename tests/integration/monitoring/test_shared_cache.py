"""A page one web worker drew is warm for every other: with the cache in Redis, another process
building the same page runs no query and draws the same charts."""

import datetime
import json
import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.utils import timezone

from monitoring import dashboards, promql
from monitoring.prometheus import record_queries
from tests import factories
from tests.integration.conftest import REPO_ROOT, _database_url

from .pages import portal_namespace
from .workloads import gpu_pod, prometheus_has, run_pod

pytestmark = [
    pytest.mark.integration,
    pytest.mark.devcluster,
    pytest.mark.django_db(transaction=True),  # the other process reads the test's rows
]

# Another gunicorn worker, as far as the cache can tell: a process of its own building the team
# page for the same window.
ANOTHER_WORKER = """
import datetime, json, sys
import django
django.setup()
from clusters.models import Cluster
from monitoring import dashboards, promql
from monitoring.prometheus import record_queries
from tenants.models import Team
start, end, slug = sys.argv[1:4]
window = promql.Window(
    start=datetime.datetime.fromisoformat(start), end=datetime.datetime.fromisoformat(end)
)
with record_queries() as records:
    dashboard = dashboards.team_dashboard(
        team=Team.objects.get(slug=slug), cluster=Cluster.objects.get(name="devcluster"),
        window=window,
    )
    drawn = {
        "charts": {c.key: c.figure_json for c in dashboard.charts},
        "pods": [p.pod for p in dashboard.pods],
    }
print(json.dumps({"queries": len(records), **drawn}))
"""


def test_a_team_page_drawn_in_one_process_is_warm_in_another(
    devcluster, core, metrics_cluster, namespace, shared_cache
):
    team = factories.TeamFactory(slug=namespace, name="Warm Team")
    portal_namespace(team, metrics_cluster)
    run_pod(core, namespace, gpu_pod("warm", gpus=1, utilisation=50))
    prometheus_has(devcluster, f'DCGM_FI_DEV_GPU_UTIL{{namespace="{namespace}"}}')
    end = timezone.now()
    window = promql.Window(start=end - datetime.timedelta(minutes=10), end=end)
    with record_queries() as records:
        here = dashboards.team_dashboard(team=team, cluster=metrics_cluster, window=window)
        assert [p.pod for p in here.pods] == ["warm"]  # read: its queries are done
    assert records  # this process asked Prometheus

    arguments = [window.start.isoformat(), end.isoformat(), team.slug]
    other = subprocess.run(
        [sys.executable, "-c", ANOTHER_WORKER, *arguments],
        env={
            **os.environ,
            **shared_cache,
            "DATABASE_URL": _database_url(settings.DATABASES["default"]),
            "DJANGO_SETTINGS_MODULE": "portal.settings",
        },
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert other.returncode == 0, other.stderr[-3000:]
    drawn = json.loads(other.stdout)
    assert drawn["queries"] == 0
    assert drawn["charts"] == {c.key: c.figure_json for c in here.charts}
    assert drawn["pods"] == ["warm"]
