"""What a team did with its past grants, beside its request in the review queue (API and page)
and on its lead's renewal form, against figures the test works out on its own: the grants'
hours from their dates, the held and used hours from the samples the backfill wrote (as
Prometheus samples them: every resolution step, each GPU's latest sample within its 5-minute
lookback), the waits from the jobs' times, and the suggestion from those.

A day of history for 4 GPUs of one team (two pods), written into the devcluster's Prometheus;
its grants: 4 GPUs from 40 days ago on, and 2 GPUs from 100 to 70 days ago."""

import datetime
import html
import math
import re
import uuid

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from devcluster.backfill import BackfillSpec
from gpujobs.grant_history import HEADROOM, OFTEN_WAITED_PERCENT, WAITED_MINUTES
from gpujobs.models import GpuJob
from tenants.models import Membership, QuotaGrant
from tests import factories

from .workloads import backfill_history, delete_series

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]

UTC = datetime.UTC
LOOKBACK_SECONDS = 300  # Prometheus' default, which the devcluster keeps
ASKED = 16


@pytest.fixture(scope="module")
def backfilled(devcluster):
    suffix = uuid.uuid4().hex[:8]
    spec = BackfillSpec(
        days=1,
        gpus=4,
        gpus_per_pod=2,
        namespaces=(f"history-{suffix}",),
        end=int(datetime.datetime.now(UTC).timestamp()) - 600,
        node_prefix=f"history-node-{suffix}",
    )
    selector = f'DCGM_FI_DEV_GPU_UTIL{{namespace="{spec.namespaces[0]}"}}'
    backfill_history(
        devcluster, spec, selector, forget_from=time_now() - 92 * 86400, forget_to=time_now() + 3600
    )
    yield spec
    delete_series(devcluster, selector)


def time_now() -> float:
    return datetime.datetime.now(UTC).timestamp()


def midnight(day: datetime.date) -> datetime.datetime:
    return datetime.datetime.combine(day, datetime.time(), tzinfo=timezone.get_current_timezone())


@pytest.fixture
def history(backfilled, metrics_cluster, admin):
    """The team, its grants, its jobs and its pending request for 16 GPUs."""
    team = factories.TeamFactory(slug=backfilled.namespaces[0], name="History")
    lead = factories.UserFactory(username=f"lead-{team.slug}")
    factories.MembershipFactory(team=team, user=lead, role=Membership.Role.LEAD)
    today = timezone.localdate()
    grants = {}
    for name, gpus, starts, ends in (("now", 4, 40, None), ("old", 2, 100, 70)):
        grants[name] = factories.QuotaGrantFactory(
            request__team=team,
            request__cluster=metrics_cluster,
            request__gpus=gpus,
            request__starts_on=today - datetime.timedelta(days=starts),
            request__ends_on=None if ends is None else today - datetime.timedelta(days=ends),
            granted_by=admin,
        )
    now = timezone.now()
    # (days ago, minutes it waited to start, None: still waiting): in the last 30 days one of
    # four waited; 60 days ago two started at once; one of another GPU kind never counts.
    for days, waited, kind in (
        (2, 30, "nvidia.com/gpu"),
        (3, 1, "nvidia.com/gpu"),
        (5, 2, "nvidia.com/gpu"),
        (6, None, "nvidia.com/gpu"),
        (60, 0, "nvidia.com/gpu"),
        (61, 3, "nvidia.com/gpu"),
        (4, 300, "nvidia.com/mig-1g.10gb"),
    ):
        created = now - datetime.timedelta(days=days)
        job = factories.GpuJobFactory(
            team=team, cluster=metrics_cluster, submitted_by=lead, gpu_resource=kind
        )
        started = None if waited is None else created + datetime.timedelta(minutes=waited)
        state = GpuJob.State.QUEUED if started is None else GpuJob.State.SUCCEEDED
        GpuJob.objects.filter(pk=job.pk).update(created_at=created, started_at=started, state=state)
    quota_request = factories.QuotaRequestFactory(
        team=team,
        cluster=metrics_cluster,
        requested_by=lead,
        gpus=ASKED,
    )
    return team, lead, grants, quota_request


def window_end() -> datetime.datetime:
    return timezone.now().replace(minute=0, second=0, microsecond=0)


def at_one_window_end(read):
    """``read()`` and the end of the windows it used: read again if an hour began meanwhile."""
    while True:
        end = window_end()
        answer = read()
        if window_end() == end:
            return answer, end


def sampled_hours(spec: BackfillSpec, start: float, end: float) -> tuple[float, float]:
    """GPU-hours held and used in (start, end], sampled as Prometheus does: at each multiple
    of the resolution, every GPU's latest sample no older than the lookback."""
    resolution = settings.MONITORING_USAGE_RESOLUTION_SECONDS
    held = used = 0.0
    first = (int(start) // resolution + 1) * resolution
    for moment in range(first, int(end) + 1, resolution):
        if moment < spec.start_timestamp:
            continue
        latest = min(
            moment - (moment - spec.start_timestamp) % spec.step_seconds, spec.end_timestamp
        )
        if moment - latest > LOOKBACK_SECONDS:
            continue
        for gpu in spec.gpu_list():
            held += 1
            used += spec.utilisation(gpu, latest) / 100
    return held * resolution / 3600, used * resolution / 3600


def expected_windows(spec: BackfillSpec, end: datetime.datetime) -> dict[int, dict]:
    today = timezone.localdate()
    now_from = midnight(today - datetime.timedelta(days=40))
    old_from = midnight(today - datetime.timedelta(days=100))
    old_to = midnight(today - datetime.timedelta(days=70 - 1))
    windows = {}
    for days in (30, 90):
        start = end - datetime.timedelta(days=days)
        now_hours = (end - max(start, now_from)).total_seconds() / 3600
        old_hours = max((old_to - max(start, old_from)).total_seconds() / 3600, 0)
        held, used = sampled_hours(spec, start.timestamp(), end.timestamp())
        windows[days] = {
            "days": days,
            "granted_gpu_hours": 4 * now_hours + 2 * old_hours,
            "hours_in_force": now_hours + old_hours,
            "held_gpu_hours": held,
            "used_gpu_hours": used,
            # 30 days: the 30-minute wait and the one still waiting; 90: the same two of six.
            "jobs": 4 if days == 30 else 6,
            "jobs_waited": 2,
        }
    return windows


def expected_suggestion(window: dict) -> int:
    if 100 * window["jobs_waited"] >= OFTEN_WAITED_PERCENT * window["jobs"]:
        return ASKED
    average = window["held_gpu_hours"] / window["hours_in_force"]
    return min(ASKED, max(1, math.ceil(average * HEADROOM)))


def test_the_review_queue_shows_the_use_of_past_grants_as_worked_out_from_the_history(
    backfilled, history, admin, api
):
    _, _, _, quota_request = history

    response, end = at_one_window_end(
        lambda: api.as_user(admin).get("/api/v1/quota-requests/review-queue/")
    )

    assert response.status_code == 200, response.content
    (item,) = [i for i in response.json()["results"] if i["id"] == quota_request.pk]
    answer = item["history"]
    expected = expected_windows(backfilled, end)
    assert answer["error"] == ""
    for window in answer["windows"]:
        wanted = expected[window["days"]]
        for figure, value in wanted.items():
            assert window[figure] == pytest.approx(value, abs=1e-6), (window["days"], figure)
        assert window["waited_minutes"] == WAITED_MINUTES
        assert window["utilisation_percent"] == pytest.approx(
            100 * wanted["used_gpu_hours"] / wanted["held_gpu_hours"]
        )
    # The day of history (up to the last full hour) lies inside both windows.
    assert expected[30]["held_gpu_hours"] == pytest.approx(expected[90]["held_gpu_hours"])
    assert 0 < expected[30]["held_gpu_hours"] <= 4 * 24 + 4 * LOOKBACK_SECONDS / 3600
    # Two of six jobs waited: a third, over the quarter the suggestion needs to take the ask.
    assert answer["suggestion"]["gpus"] == ASKED == expected_suggestion(expected[90])
    assert "2 of 6 jobs waited over 10 min" in answer["suggestion"]["arithmetic"]


def test_a_team_that_rarely_waited_is_suggested_what_it_held_and_approved_in_one_click(
    backfilled, history, admin, client_as
):
    team, _, _, quota_request = history
    # The job still waiting started after all, at once: one of six waited over 90 days.
    GpuJob.objects.filter(team=team, started_at__isnull=True).update(
        started_at=timezone.now() - datetime.timedelta(days=6), state=GpuJob.State.SUCCEEDED
    )
    client = client_as(admin)

    page, end = at_one_window_end(lambda: client.get(reverse("review-queue")))

    expected = expected_windows(backfilled, end)[90] | {"jobs_waited": 1}
    suggested = expected_suggestion(expected)
    assert 1 <= suggested < ASKED
    text = page.content.decode()
    card = text[text.index(f'id="request-{quota_request.pk}"') :]
    row = re.search(r'<tr data-days="90">(.*?)</tr>', card, re.S).group(1)
    assert f"{expected['granted_gpu_hours']:.1f}" in row
    assert f"{expected['held_gpu_hours']:.1f}" in row
    assert "1 of 6" in row
    assert f"Suggested: {suggested} GPU" in card
    one_click = re.search(r'data-testid="approve-suggestion">(.*?)</form>', card, re.S).group(1)
    fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', one_click))
    assert fields[f"approve-{quota_request.pk}-gpus"] == str(suggested)

    response = client.post(
        reverse("quota-request-approve", args=[quota_request.pk]),
        {name: html.unescape(value) for name, value in fields.items()},
    )

    assert response.status_code == 302
    grant = QuotaGrant.objects.get(request=quota_request)
    assert grant.gpus == suggested
    assert "suggested size" in grant.request.decision_note


def test_the_renewal_form_shows_the_lead_the_figures_before_they_submit(
    backfilled, history, client_as
):
    team, lead, grants, _ = history

    page = client_as(lead).get(
        reverse("quota-request-new", args=[team.slug]) + f"?extends={grants['old'].pk}"
    )

    text = page.content.decode()
    assert page.status_code == 200
    assert 'data-testid="grant-history"' in text
    assert '<tr data-days="30">' in text
    assert '<tr data-days="90">' in text
    # The renewal asks for the old grant's 2 GPUs, and 2 of 6 jobs waited: the ask stands.
    assert "Suggested: 2 GPUs." in text
