"""A member's own limit in the team, without a cluster: under quota only a job beyond it is
refused (400 naming the field, with the reason), a session on either mode; on a Kueue cluster a
job beyond it is stored waiting with the reason and not sent; a release sends waiting jobs
oldest first as far as the limit allows; a lead sets and lifts limits from the page; only leads
may. Nothing here is enqueued (the test's transaction never commits, or the sends are
captured)."""

import datetime

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from clusters.models import QuotaMode
from gpujobs import member_holds
from gpujobs.models import GpuJob
from interactive import services as interactive_services
from tenants.models import AuditEvent
from tests import factories
from workloads import member_limits
from workloads.models import MemberLimit
from workloads.pod_states import Reason

pytestmark = pytest.mark.django_db

State = GpuJob.State


@pytest.fixture
def grant(team, cluster, lead, admin):
    return factories.QuotaGrantFactory(
        request__team=team,
        request__cluster=cluster,
        request__requested_by=lead,
        request__gpus=8,
        request__starts_on=timezone.localdate(),
        request__ends_on=timezone.localdate() + datetime.timedelta(days=30),
        granted_by=admin,
    )


def job_body(**overrides):
    return {
        "team": "vision",
        "cluster": "gpu-east",
        "name": "train",
        "image": "registry.example.com/vision/trainer:1.4",
        "gpus": 2,
        **overrides,
    }


def limit(lead, team, member, cluster, **figures):
    return member_limits.member_limit_set(
        actor=lead,
        team=team,
        user=member,
        cluster=cluster,
        max_gpus=figures.get("max_gpus"),
        max_running=figures.get("max_running"),
    )


def test_under_quota_only_a_job_beyond_the_members_gpus_is_refused_naming_gpus(
    api, member, lead, team, cluster, grant
):
    limit(lead, team, member, cluster, max_gpus=3)
    client = api.as_user(member)
    assert client.post("/api/v1/jobs/", job_body(gpus=2)).status_code == 201

    response = client.post("/api/v1/jobs/", job_body(gpus=2))

    assert response.status_code == 400
    message = response.json()["gpus"][0]
    assert message.startswith("Your limit in the team is reached: mo-member may hold 3 GPUs")
    assert "holds 2 and this asks for 2" in message
    # The team's quota (8) had room: the lead, who has no limit, still submits.
    assert api.as_user(lead).post("/api/v1/jobs/", job_body(gpus=4)).status_code == 201


def test_a_batch_is_refused_whole_when_a_job_of_it_goes_beyond(
    api, member, lead, team, cluster, grant
):
    limit(lead, team, member, cluster, max_running=2)

    jobs = [{"name": f"j{i}", "image": job_body()["image"], "gpus": 1} for i in range(3)]
    response = api.as_user(member).post(
        "/api/v1/jobs/batch/", {"team": "vision", "cluster": "gpu-east", "jobs": jobs}
    )

    assert response.status_code == 400, response.content
    assert "may run 2 jobs or sessions at once" in str(response.json())
    assert not GpuJob.objects.filter(team=team).exists()


def test_on_a_kueue_cluster_jobs_beyond_wait_and_are_released_oldest_first(
    api, member, lead, team, cluster, grant, django_capture_on_commit_callbacks
):
    cluster.quota_mode = QuotaMode.KUEUE
    cluster.save()
    limit(lead, team, member, cluster, max_gpus=4)
    client = api.as_user(member)
    with django_capture_on_commit_callbacks() as sent:
        ids = [
            client.post("/api/v1/jobs/", job_body(name=f"j{i}", gpus=gpus)).json()["id"]
            for i, gpus in enumerate((3, 2, 1))
        ]
    first, second, third = (GpuJob.objects.get(pk=pk) for pk in ids)

    assert first.reason == ""
    # The second does not fit (3 + 2 > 4); the third would, but does not overtake it.
    for waiting in (second, third):
        assert (waiting.state, waiting.reason) == (State.QUEUED, Reason.MEMBER_LIMIT)
    assert "may hold 4 GPUs at once on gpu-east" in second.message
    assert "earlier jobs of yours wait first" in third.message
    assert len(sent) == 1  # only the first job is sent to the cluster

    # Nothing is released while the first holds its GPUs; once it ends, both go.
    assert (
        member_holds.release_held_jobs(team_id=team.pk, cluster_id=cluster.pk, user_id=member.pk)
        == []
    )
    GpuJob.objects.filter(pk=first.pk).update(state=State.SUCCEEDED)
    with django_capture_on_commit_callbacks(execute=False) as sent:
        released = member_holds.release_every_held_job()

    assert list(released.values()) == [[second.pk, third.pk]]
    assert len(sent) == 1
    assert not GpuJob.objects.filter(reason=Reason.MEMBER_LIMIT).exists()


def test_a_session_beyond_the_limit_is_refused_on_either_mode(api, member, lead, team, cluster):
    cluster.allowed_registries = ["registry.example.com"]
    cluster.save()
    limit(lead, team, member, cluster, max_running=1)
    factories.InteractiveSessionFactory(team=team, cluster=cluster, owner=member, state="running")

    response = api.as_user(member).post(
        "/api/v1/sessions/",
        {
            "team": "vision",
            "cluster": "gpu-east",
            "name": "explore",
            "image": "registry.example.com/ml/notebook:1",
        },
    )

    assert response.status_code == 400, response.content
    assert "may run 1 job or session at once" in response.json()["gpus"][0]


def test_only_leads_set_limits_and_every_change_is_audited(lead, member, team, cluster):
    with pytest.raises(PermissionDenied):
        limit(member, team, member, cluster, max_gpus=1)
    with pytest.raises(ValidationError) as refused:
        limit(lead, team, member, cluster)
    assert "max_gpus" in refused.value.message_dict
    stranger = factories.UserFactory()
    with pytest.raises(ValidationError) as refused:
        limit(lead, team, stranger, cluster, max_gpus=1)
    assert "user" in refused.value.message_dict

    set_ = limit(lead, team, member, cluster, max_gpus=2)
    limit(lead, team, member, cluster, max_gpus=4, max_running=1)
    member_limits.member_limit_remove(actor=lead, limit=set_)

    actions = list(
        AuditEvent.objects.filter(team=team, target_type="MemberLimit")
        .order_by("pk")
        .values_list("action", "after")
    )
    assert [a for a, _ in actions] == [
        "member_limit.set",
        "member_limit.set",
        "member_limit.removed",
    ]
    assert actions[1][1]["max_gpus"] == 4
    assert not MemberLimit.objects.exists()


def test_a_lead_sets_and_lifts_a_limit_from_the_team_page(client_as, lead, member, team, cluster):
    client = client_as(lead)
    page = client.get(f"/teams/{team.slug}/").content.decode()
    assert "No member has a limit" in page

    form = client.get(f"/teams/{team.slug}/member-limits/")
    assert form.status_code == 200
    bad = client.post(
        f"/teams/{team.slug}/member-limits/", {"user": member.username, "cluster": cluster.name}
    )
    assert bad.status_code == 400
    assert "Give a limit of GPUs, of running workloads, or both." in bad.content.decode()
    saved = client.post(
        f"/teams/{team.slug}/member-limits/",
        {"user": member.username, "cluster": cluster.name, "max_gpus": "2"},
    )
    assert saved.status_code == 302
    page = client.get(f"/teams/{team.slug}/").content.decode()
    assert f'data-member="{member.username}" data-cluster="gpu-east"' in page
    assert '<td class="num" data-testid="gpus">0 / 2</td>' in page

    stored = MemberLimit.objects.get()
    assert client.post(f"/teams/{team.slug}/member-limits/{stored.pk}/remove/").status_code == 302
    assert not MemberLimit.objects.exists()
    assert client_as(member).get(f"/teams/{team.slug}/member-limits/").status_code == 403


def test_lifting_a_limit_or_ending_a_session_sends_for_the_waiting_jobs(
    api, member, lead, team, cluster, grant, django_capture_on_commit_callbacks
):
    cluster.quota_mode = QuotaMode.KUEUE
    cluster.save()
    limited = limit(lead, team, member, cluster, max_running=1)
    session = factories.InteractiveSessionFactory(
        team=team, cluster=cluster, owner=member, state="running"
    )
    waiting = api.as_user(member).post("/api/v1/jobs/", job_body()).json()
    assert waiting["reason"] == Reason.MEMBER_LIMIT

    with django_capture_on_commit_callbacks() as ended:
        interactive_services.session_stop(actor=member, session=session)
    with django_capture_on_commit_callbacks() as lifted:
        member_limits.member_limit_remove(actor=lead, limit=limited)

    # Each asks for a release of the member's waiting jobs once it commits (besides its own
    # work: the session's Job deleted).
    for callbacks in (ended, lifted):
        assert "release" in " ".join(repr(c) for c in callbacks), callbacks
    assert member_holds.release_held_jobs(
        team_id=team.pk, cluster_id=cluster.pk, user_id=member.pk
    ) == [waiting["id"]]
