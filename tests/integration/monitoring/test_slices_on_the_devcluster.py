"""MIG slices and shared GPUs in monitoring and billing, end to end on the devcluster: the DCGM
simulator publishes a series set per MIG instance (``GPU_I_PROFILE``, ``GPU_I_ID``) and, on a
time-sliced GPU, one per pod at its own share of the GPU's time; the devcluster's Prometheus
scrapes it; the portal charts a job's slice and share on the job's page, draws each MIG instance
inside its GPU on the cluster's heatmap, judges idleness per slice (and stops only the idle
slice's Job), and prices slices and replicas at their share of a GPU on the monthly statement.

The GPU sharing nodes come from the ``gpu_sharing`` fixture (gpu-node-mig-0: 2 A100s as 14 x
1g.10gb; gpu-node-shared-0: 2 A100s time-sliced 4 ways). The pods the idle and the statement
tests judge run for the whole module (``module_pods``, started before the first test and not
waited for), so the minute an idle window needs and the held time a statement measures pass
while the other tests run."""

from __future__ import annotations

import datetime
import time
from fractions import Fraction
from types import SimpleNamespace

import pytest
from django.utils import timezone
from kubernetes.client.rest import ApiException

from billing.prices import price_set
from billing.statements import monthly_statement
from clusters.models import Cluster, GpuModelCapacity, GpuUtilizationMetric
from gpujobs.models import GpuJob
from monitoring import idle, promql
from monitoring.metrics import metrics_config, pod_usage, prometheus_for
from monitoring.models import IdlePod, IdlePolicy, Notification
from tenants.models import Membership, Team
from tests import factories
from tests.integration import kube
from tests.integration.gpujobs.fixtures import (  # noqa: F401 (fixtures)
    gpu_cluster,
    portal_kubeconfig,
    running_services,
    submit,
    wait_for_state,
    watcher_process,
)
from tests.integration.gpujobs.test_jobs_on_gpu_slices import granted, inventory

from .pages import chart_values, figure_on_page, member_of, portal_namespace
from .workloads import (
    MANAGED_BY,
    UTILISATION,
    create_team_namespace,
    delete_namespace,
    eventually,
    patiently,
    prometheus_has,
    running_job_pod,
)

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]

A100 = "NVIDIA-A100-SXM4-80GB"
A100_SHARED = f"{A100}-SHARED"
SLICE = "nvidia.com/mig-1g.10gb"
SHARED = "nvidia.com/gpu.shared"
MIG_NODE, SHARED_NODE = "gpu-node-mig-0", "gpu-node-shared-0"
ENGINE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
WINDOW_MINUTES = 1
SCRAPE_SECONDS = 5  # the devcluster's scrape interval


# --- the module's pods ---------------------------------------------------------------------------


def pod_on(name: str, resource: str, model: str, *, count=1, utilisation=None, labels=None):
    """A pod as the portal builds them, asking for ``count`` of ``resource`` (a MIG profile or
    shared replicas) instead of whole GPUs, placed on the nodes of ``model``."""
    annotations = {UTILISATION: str(utilisation)} if utilisation is not None else {}
    manifest = kube.gpu_pod(name, count, annotations=annotations, labels=labels, gpu_model=model)
    for container in manifest["spec"]["containers"]:
        for amounts in container["resources"].values():
            amounts[resource] = amounts.pop("nvidia.com/gpu")
    return manifest


def slice_job(name: str, *, utilisation: int) -> dict:
    """A Job of the portal's (its label) whose one pod holds one 1g.10gb slice."""
    template = pod_on(name, SLICE, A100, utilisation=utilisation, labels={MANAGED_BY: "gpu-portal"})
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {MANAGED_BY: "gpu-portal"}},
        "spec": {
            "backoffLimit": 0,
            # As the portal's own Jobs: the team-jobs admission policy wants a deadline.
            "activeDeadlineSeconds": 3600,
            "template": {"metadata": template["metadata"], "spec": template["spec"]},
        },
    }


@pytest.fixture(scope="module", autouse=True)
def module_pods(gpu_sharing, core, batch):
    """Started once, before the first test, and not waited for: in one namespace two portal
    Jobs on two slices of the MIG node (``nap`` at 0%, ``crunch`` at 90%), created first so
    that the simulator gives them instances of the same GPU; in another a pod holding two
    slices (``eval``, 50%) and a pod holding one replica of a shared GPU (``nb``, 40%)."""
    idle_ns = create_team_namespace(core, "slidle")
    bill_ns = create_team_namespace(core, "slbill")
    try:
        for name, utilisation in (("nap", 0), ("crunch", 90)):
            patiently(
                batch.create_namespaced_job, idle_ns, slice_job(name, utilisation=utilisation)
            )
        patiently(
            core.create_namespaced_pod,
            bill_ns,
            pod_on("eval", SLICE, A100, count=2, utilisation=50),
        )
        patiently(
            core.create_namespaced_pod, bill_ns, pod_on("nb", SHARED, A100_SHARED, utilisation=40)
        )
        yield SimpleNamespace(idle_ns=idle_ns, bill_ns=bill_ns)
    finally:
        delete_namespace(core, idle_ns)
        delete_namespace(core, bill_ns)


@pytest.fixture
def portal_cluster(gpu_cluster):  # noqa: F811 (the fixture imported above)
    """The devcluster as the portal knows it, acting with the portal's least-privilege
    identity (deploy/rbac.yaml)."""
    return gpu_cluster


@pytest.fixture
def services(running_services):  # noqa: F811 (the fixture imported above)
    """The real Celery worker and the watcher, on the test database."""
    return running_services


# --- helpers -------------------------------------------------------------------------------------


def series_of(devcluster, metric: str, **labels) -> list[dict]:
    """The label sets of ``metric``'s series now, as the simulator published them."""
    matchers = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return [s["metric"] for s in devcluster.prometheus_query(f"{metric}{{{matchers}}}")]


def instance_row(labels: dict) -> str:
    """The row (and line) name the portal gives a MIG instance, from its DCGM labels."""
    return (
        f"{labels['Hostname']} · GPU {labels['gpu']} · {labels['GPU_I_PROFILE']} "
        f"#{labels['GPU_I_ID']}"
    )


def gpu_fragment_values(page, job: GpuJob) -> dict:
    """The job page's GPU fragment's utilisation chart: line name -> its last value."""
    fragment = page.get(f"/jobs/{job.pk}/gpus/")
    assert fragment.status_code == 200
    assert 'data-testid="metrics-error"' not in fragment.content.decode()
    return chart_values(fragment, "utilisation")


def heatmap_rows(response) -> dict[str, list]:
    figure = figure_on_page(response, "heatmap")
    if figure is None:
        return {}
    (heatmap,) = figure["data"]
    return dict(zip(heatmap["y"], heatmap["z"], strict=True))


def last(cells: list) -> float | None:
    return next((v for v in reversed(cells) if v is not None), None)


# --- 1. DCGM charts per slice --------------------------------------------------------------------


def test_a_slice_and_a_shared_gpu_are_charted_per_job_and_the_heatmap_draws_the_instance(
    devcluster, portal_cluster, core, services, admin, client_as
):
    """A job on a 1g.10gb slice at 60% charts its instance's line at 60 (the slice's engine
    activity: no GPU_UTIL exists for it), under the default utilisation metric and under
    GR_ENGINE_ACTIVE alike; a job on a time-sliced GPU charts its own share of the GPU's time;
    the cluster's heatmap draws every MIG instance as a row inside its GPU, the job's at 60,
    and the shared GPU as one row, its pods' shares summed."""
    assert inventory(portal_cluster)["kinds"][SLICE] == 14
    gpu = granted(
        admin, portal_cluster, {(SLICE, A100): 1, (SHARED, A100_SHARED): 1}, name="charts"
    )
    try:
        on_slice = submit(
            gpu.member, gpu.team, portal_cluster, name="mig", gpu_resource=SLICE, gpu_model=A100,
            annotations={UTILISATION: "60"},
        )  # fmt: skip
        on_shared = submit(
            gpu.member, gpu.team, portal_cluster, name="timesliced", gpu_resource=SHARED,
            gpu_model=A100_SHARED, annotations={UTILISATION: "60"},
        )  # fmt: skip
        assert on_slice.status_code == 201, on_slice.data
        assert on_shared.status_code == 201, on_shared.data
        mig_job = wait_for_state(on_slice.data["id"], GpuJob.State.RUNNING)
        shared_job = wait_for_state(on_shared.data["id"], GpuJob.State.RUNNING)
        (mig_pod,) = mig_job.pods
        (shared_pod,) = shared_job.pods

        # What the simulator published for them, as dcgm-exporter labels it.
        (instance,) = prometheus_has(
            devcluster, f'{ENGINE}{{namespace="{gpu.namespace}",pod="{mig_pod}"}}'
        )
        instance = instance["metric"]
        assert (instance["Hostname"], instance["GPU_I_PROFILE"]) == (MIG_NODE, "1g.10gb")
        assert not series_of(devcluster, GPU_UTIL, namespace=gpu.namespace, pod=mig_pod)
        (share,) = prometheus_has(
            devcluster, f'{GPU_UTIL}{{namespace="{gpu.namespace}",pod="{shared_pod}"}}'
        )
        shared_gpu = share["metric"]
        assert shared_gpu["Hostname"] == SHARED_NODE
        sharers = series_of(devcluster, GPU_UTIL, UUID=shared_gpu["UUID"])
        # Its own share: 60% of the GPU's time split among the pods sharing it (another test's
        # pod may share it; floored to hundredths, as the simulator splits it).
        own_share = int(60 * 100 / len(sharers)) / 100
        shared_line = f"{SHARED_NODE} · GPU {shared_gpu['gpu']}"

        page = client_as(gpu.member)
        expected = {
            mig_job.pk: {instance_row(instance): 60},
            shared_job.pk: {shared_line: pytest.approx(own_share, abs=0.01)},
        }
        for metric in (GpuUtilizationMetric.GPU_UTIL, GpuUtilizationMetric.GR_ENGINE_ACTIVE):
            Cluster.objects.filter(pk=portal_cluster.pk).update(gpu_utilization_metric=metric)
            for job in (mig_job, shared_job):
                values = eventually(
                    lambda job=job: (v := gpu_fragment_values(page, job)) and None not in v.values()
                    and v,
                    timeout=60,
                    what=f"job {job.name}'s GPU line with {metric}",
                )  # fmt: skip
                assert values == expected[job.pk], (metric, values)

        Cluster.objects.filter(pk=portal_cluster.pk).update(
            gpu_utilization_metric=GpuUtilizationMetric.GPU_UTIL
        )
        cluster_page = client_as(admin)
        row = instance_row(instance)

        def drawn():
            response = cluster_page.get(f"/monitoring/clusters/{portal_cluster.name}/?window=1h")
            rows = heatmap_rows(response)
            return rows and last(rows.get(row, [])) == 60 and rows

        # The heatmap's steps are whole 30 s: a new sample shows at the next boundary.
        rows = eventually(drawn, timeout=60, what=f"{row} at 60 in the heatmap")
        names = list(rows)
        mig_rows = [name for name in names if name.startswith(f"{MIG_NODE} ")]
        # Every instance of both GPUs, held or not, each under its GPU, in order, side by side.
        assert mig_rows == [
            f"{MIG_NODE} · GPU {g} · 1g.10gb #{i}" for g in range(2) for i in range(7)
        ]
        first = names.index(mig_rows[0])
        assert names[first : first + 14] == mig_rows
        assert f"{MIG_NODE} · GPU 0" not in rows  # a partitioned GPU has no utilisation of its own
        # The shared GPU is one row: the shares of the pods sharing it, summed.
        shares = devcluster.prometheus_query(f'sum({GPU_UTIL}{{UUID="{shared_gpu["UUID"]}"}})')
        assert last(rows[shared_line]) == round(float(shares[0]["value"][1]))
        assert last(rows[shared_line]) >= round(own_share)
    finally:
        delete_namespace(core, gpu.namespace)


# --- 2. idle detection per slice -----------------------------------------------------------------


def test_idle_detection_flags_and_stops_only_the_idle_slice_of_a_shared_gpu(
    devcluster, module_pods, portal_cluster, core, batch
):
    """Two Jobs on two instances of one A100, one at 0% and one at 90%: each is judged by its
    own instance (the GPU as a whole is busy), only the idle one is flagged, described as the
    seventh of a GPU it is, and the team's stop policy warns about and then deletes only its
    Job; the busy one runs on."""
    Cluster.objects.filter(pk=portal_cluster.pk).update(idle_window_minutes=WINDOW_MINUTES)
    portal_cluster.refresh_from_db()
    namespace = module_pods.idle_ns
    team = factories.TeamFactory(slug=namespace, name="Idle slices")
    portal_namespace(team, portal_cluster)
    lead = member_of(team, f"lead-{namespace}", Membership.Role.LEAD)
    nap = running_job_pod(core, namespace, "nap")
    crunch = running_job_pod(core, namespace, "crunch")

    config = metrics_config(portal_cluster)
    judged = promql.pod_average_utilisation(
        config, window_minutes=WINDOW_MINUTES, namespace=namespace
    )
    prometheus_has(devcluster, judged, count=2, timeout=150)
    instances = {s["pod"]: s for s in series_of(devcluster, ENGINE, namespace=namespace)}
    assert set(instances) == {nap, crunch}
    assert instances[nap]["UUID"] == instances[crunch]["UUID"]  # one physical GPU
    assert instances[nap]["GPU_I_ID"] != instances[crunch]["GPU_I_ID"]

    with prometheus_for(portal_cluster) as prometheus:
        usage = {p.pod: p for p in pod_usage(prometheus, portal_cluster, namespace=namespace)}
    assert usage[crunch].average_utilisation == pytest.approx(90)
    assert not usage[crunch].idle
    assert usage[nap].average_utilisation == pytest.approx(0)

    IdlePolicy.objects.create(team=team, stop_after_minutes=30, warn_minutes_before_stop=10)
    first = idle.idle_check_cluster(cluster=portal_cluster, now=timezone.now())

    assert first.error == ""
    assert first.idle == [f"{namespace}/{nap}"]
    assert first.notified == [f"{namespace}/{nap}"]
    assert first.warned == first.stopped == []
    episode = IdlePod.objects.get(team=team)
    assert (episode.pod, episode.gpus) == (nap, 1)
    assert episode.gpu_equivalents == pytest.approx(1 / 7)
    assert episode.gpus_described == "1 × 1g.10gb slice (1/7 GPU)"
    (note,) = Notification.objects.filter(team=team, kind=Notification.Kind.IDLE)
    assert note.user == lead
    assert "1 × 1g.10gb slice (1/7 GPU)" in note.body

    # Idle for 25 of the policy's 30 minutes: warned, about the idle slice only.
    IdlePod.objects.filter(pk=episode.pk).update(
        first_idle_at=timezone.now() - datetime.timedelta(minutes=25)
    )
    warned = idle.idle_check_cluster(cluster=portal_cluster, now=timezone.now())
    assert warned.idle == [f"{namespace}/{nap}"]
    assert warned.warned == [f"{namespace}/{nap}"]
    assert warned.stopped == []

    # Past the limit and warned ten minutes ago: stopped, only it.
    IdlePod.objects.filter(pk=episode.pk).update(
        first_idle_at=timezone.now() - datetime.timedelta(minutes=40),
        warned_at=timezone.now() - datetime.timedelta(minutes=11),
    )
    stopped = idle.idle_check_cluster(cluster=portal_cluster, now=timezone.now())
    assert stopped.stopped == [f"{namespace}/{nap}"], stopped

    def job_gone(name):
        try:
            batch.read_namespaced_job(name, namespace)
        except ApiException as error:
            return error.status == 404
        return False

    eventually(lambda: job_gone("nap"), timeout=30, what="the idle slice's Job deleted")
    assert not job_gone("crunch")
    assert patiently(core.read_namespaced_pod, crunch, namespace).status.phase == "Running"
    assert IdlePod.objects.get(pk=episode.pk).stopped_at is not None
    assert not IdlePod.objects.filter(team=team, pod=crunch).exists()


# --- 3. a statement pricing slices ---------------------------------------------------------------


def held_samples(devcluster, namespace: str, pod: str, metric: str, span: str, at: float) -> int:
    """How many samples of the pod's series (each of its slices' or shares') Prometheus has
    in ``span`` at the usage report's resolution: what the statement counts."""
    query = f'sum(count_over_time(({metric}{{namespace="{namespace}",pod="{pod}"}})[{span}]))'
    result = devcluster.prometheus_query(query, at=at)
    return int(float(result[0]["value"][1])) if result else 0


def test_the_statement_prices_slices_and_shared_replicas_at_their_share_of_a_gpu(
    devcluster, module_pods, portal_cluster, core, admin, settings, api
):
    """A team granted 4 x 1g.10gb and 2 shared A100 replicas since midnight, the A100 priced
    at 14 an hour (any other model at 100): reserved GPU-hours are 4/7 and 2/4 of the units
    granted, at the A100's price (the shared grant at its base model's); the held hours
    Prometheus measured for its pods (two slices, one replica) are GPU equivalents, 2/7 + 1/4
    of the time they ran, priced at 14 too. The same figures over the REST API."""
    settings.MONITORING_USAGE_RESOLUTION_SECONDS = SCRAPE_SECONDS
    inventory(portal_cluster)  # the capacity sync: the shared node's 4 replicas per GPU
    portal_cluster.refresh_from_db()
    assert portal_cluster.shared_gpu_replicas == {SHARED_NODE: 4}
    assert GpuModelCapacity.objects.get(cluster=portal_cluster, gpu_model=A100_SHARED).replicas == 4
    namespace = module_pods.bill_ns
    team = factories.TeamFactory(slug=namespace, name="Billed slices")
    portal_namespace(team, portal_cluster)
    today = timezone.localdate()
    for resource, model, units in ((SLICE, A100, 4), (SHARED, A100_SHARED, 2)):
        factories.QuotaGrantFactory(
            request__team=team, request__cluster=portal_cluster, request__gpu_resource=resource,
            request__gpu_model=model, request__gpus=units, request__starts_on=today,
            request__ends_on=None, granted_by=admin,
        )  # fmt: skip
    month = today.replace(day=1)
    price_set(actor=admin, gpu_model="", effective_from=month, gpu_hour="100")
    price_set(actor=admin, gpu_model=A100, effective_from=month, gpu_hour="14")

    def settled_end() -> int:
        """A time a little behind the last scrape, on the resolution's grid: the statement
        and the samples counted below are read as of it, so that the figures do not move."""
        return (int(time.time()) - 2 * SCRAPE_SECONDS) // SCRAPE_SECONDS * SCRAPE_SECONDS

    def held_long_enough() -> int | None:
        """Once both pods held their slices and replica for half a minute by then."""
        end = settled_end()
        span = f"5m:{SCRAPE_SECONDS}s"
        enough = held_samples(devcluster, namespace, "eval", ENGINE, span, end) >= 2 * 6
        enough &= held_samples(devcluster, namespace, "nb", GPU_UTIL, span, end) >= 6
        return end if enough else None

    end = eventually(held_long_enough, timeout=90, what="half a minute of the pods' samples")
    now = datetime.datetime.fromtimestamp(end, datetime.UTC)
    started = time.monotonic()
    statement = monthly_statement(first_month=month, teams=Team.objects.filter(pk=team.pk), now=now)
    took = time.monotonic() - started

    assert statement.errors == {}
    (line,) = statement.lines
    costing = line.costing
    midnight = datetime.datetime.combine(
        today, datetime.time(), tzinfo=timezone.get_current_timezone()
    )
    hours = (now - midnight).total_seconds() / 3600  # each unit granted, since midnight
    assert costing.granted_gpu_hours == pytest.approx(6 * hours)  # units: 4 slices, 2 replicas
    reserved = hours * (4 * Fraction(1, 7) + 2 * Fraction(1, 4))
    assert costing.reserved_gpu_hours == pytest.approx(float(reserved))
    assert float(costing.reserved_cost) == pytest.approx(14 * float(reserved))

    # Held: each sample of a slice's series a seventh of a GPU, of the replica's a quarter.
    span = f"{end - int(midnight.replace(day=1).timestamp())}s:{SCRAPE_SECONDS}s"
    slices = held_samples(devcluster, namespace, "eval", ENGINE, span, end)
    replica = held_samples(devcluster, namespace, "nb", GPU_UTIL, span, end)
    assert slices >= 12
    assert replica >= 6
    held = SCRAPE_SECONDS * (slices / 7 + replica / 4) / 3600
    assert costing.held_gpu_hours == pytest.approx(held, rel=1e-6)
    assert costing.held_gpu_equivalent_hours == pytest.approx(held, rel=1e-6)
    assert float(costing.used_cost) == pytest.approx(14 * held, abs=0.01)
    assert costing.held_by_model == {
        A100: pytest.approx(held * (4 / 7) / (4 / 7 + 2 / 4)),
        A100_SHARED: pytest.approx(held * (2 / 4) / (4 / 7 + 2 / 4)),
    }
    # And that is the time the pods ran, as the API server saw them start: each series
    # sampled from its first scrape (a scrape or two after the start) to the end, every
    # resolution step counting a whole step.
    for pod, samples, series in (("eval", slices, 2), ("nb", replica, 1)):
        began = patiently(core.read_namespaced_pod, pod, namespace).status.start_time
        ran = end - began.timestamp()
        sampled = SCRAPE_SECONDS * samples / series
        assert ran - 3 * SCRAPE_SECONDS <= sampled <= ran + SCRAPE_SECONDS, (pod, ran, sampled)
    print(f"statement of {namespace} in {took:.2f}s: held {held:.5f} GPU-hours")

    body = api.as_user(admin).get(f"/api/v1/billing/statements/?month={month:%Y-%m}").json()
    answered = timezone.now()
    (row,) = [r for r in body["teams"] if r["team"] == team.slug]
    # The API reserves up to when it answered, a few seconds after ``end``: early in the day
    # those seconds are a large share of the hours since midnight.
    reserved_by_then = float(reserved) * (answered - midnight) / (now - midnight)
    hours_then = (float(reserved) - 0.001, reserved_by_then + 0.001)  # the API's 3 decimals
    assert hours_then[0] <= row["reserved_gpu_hours"] <= hours_then[1]
    cost_then = (14 * float(reserved) - 0.01, 14 * reserved_by_then + 0.01)  # and 2
    assert cost_then[0] <= float(row["reserved_cost"]) <= cost_then[1]
    assert row["held_gpu_hours"] >= round(held, 3)
