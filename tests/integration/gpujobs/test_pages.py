"""The job pages without a cluster: the submit form and its errors, the list and its filters,
the detail page's live fragments, and the team page's jobs and GPUs in use."""

import datetime
import re
from html import unescape

import pytest
from django.utils import timezone

from gpujobs.models import GpuJob
from gpujobs.templatetags import gpujobs as gpujob_tags
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def grant(team, cluster, lead, admin):
    today = timezone.localdate()
    return factories.QuotaGrantFactory(
        request__team=team,
        request__cluster=cluster,
        request__requested_by=lead,
        request__gpus=4,
        request__starts_on=today,
        request__ends_on=today + datetime.timedelta(days=30),
        granted_by=admin,
    )


def job(team, cluster, user, **kwargs):
    kwargs.setdefault("name", "j")
    kwargs.setdefault("gpus", 1)
    return GpuJob.objects.create(
        team=team,
        cluster=cluster,
        submitted_by=user,
        image="registry.example.com/x:1",
        max_runtime_seconds=60,
        **kwargs,
    )


FORM = {
    "name": "bert",
    "image": "registry.example.com/vision/trainer:1.4",
    "command": "python\ntrain.py\n",
    "args": "--note\na b; $(whoami)\n",
    "env": "LR=3e-4\nPATHS=a=b\n",
    "gpus": "2",
    "gpu_model": "",
    "max_runtime_minutes": "30",
    "backoff_limit": "0",
}


def test_member_submits_through_the_form_and_lands_on_the_job(
    client_as, member, team, cluster, grant
):
    response = client_as(member).post(
        "/jobs/new/", {**FORM, "team": team.pk, "cluster": cluster.pk}
    )

    job = GpuJob.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/jobs/{job.pk}/"
    assert job.command == ["python", "train.py"]
    assert job.args == ["--note", "a b; $(whoami)"]  # lines as they are, no shell
    assert job.env == [{"name": "LR", "value": "3e-4"}, {"name": "PATHS", "value": "a=b"}]
    assert job.max_runtime_seconds == 1800
    assert job.submitted_by == member


def test_form_shows_the_quota_refusal_beside_gpus(client_as, member, team, cluster, grant):
    response = client_as(member).post(
        "/jobs/new/", {**FORM, "team": team.pk, "cluster": cluster.pk, "gpus": "5"}
    )

    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="field-gpus"' in html
    assert "this job asks for 5, exceeding it by 1" in html
    assert not GpuJob.objects.exists()


def test_form_shows_the_registry_refusal_beside_image(client_as, member, team, cluster, grant):
    cluster.allowed_registries = ["nvcr.io"]
    cluster.allow_all_registries = False
    cluster.save()

    html = (
        client_as(member)
        .post("/jobs/new/", {**FORM, "team": team.pk, "cluster": cluster.pk})
        .content.decode()
    )

    assert "which cluster gpu-east does not allow" in html


def test_preprocessing_from_the_form(client_as, member, team, cluster, grant):
    client_as(member).post(
        "/jobs/new/",
        {
            **FORM,
            "team": team.pk,
            "cluster": cluster.pk,
            "preprocess_mode": "before",
            "preprocess_image": "registry.example.com/cleaner:1",
            "preprocess_command": "clean\n--fast\n",
            "preprocess_cpu_cores": "1",
        },
    )

    assert GpuJob.objects.get().preprocess == {
        "image": "registry.example.com/cleaner:1",
        "mode": "before",
        "command": ["clean", "--fast"],
        "args": [],
        "cpu_cores": "1",
        "memory_gib": None,
    }


def test_viewer_only_cannot_open_the_form(client_as, viewer):
    assert client_as(viewer).get("/jobs/new/").status_code == 403


def test_form_offers_only_teams_where_the_user_may_run_jobs(
    client_as, member, other_team, team, cluster
):
    factories.MembershipFactory(team=other_team, user=member, role="viewer")

    page = client_as(member).get(f"/jobs/new/?team={team.slug}").content.decode()

    team_select = re.search(r'<select name="team".*?</select>', page, re.S).group(0)
    assert f'<option value="{team.pk}" selected>' in team_select
    assert f'value="{other_team.pk}"' not in team_select


def test_gpu_model_is_offered_when_the_cluster_has_several(client_as, member, team, cluster):
    capacity = cluster.gpu_capacities.get()
    capacity.gpu_model = "NVIDIA-A100-SXM4-80GB, NVIDIA-H100-80GB-HBM3"
    capacity.save()

    html = client_as(member).get("/jobs/new/").content.decode()

    assert '<option value="NVIDIA-H100-80GB-HBM3">' in html


def test_gpu_model_field_is_hidden_with_one_model(client_as, member, team, cluster):
    html = client_as(member).get("/jobs/new/").content.decode()

    assert 'type="hidden" name="gpu_model"' in html


def test_gpu_kind_field_is_hidden_when_the_cluster_offers_whole_gpus_only(
    client_as, member, team, cluster
):
    html = client_as(member).get("/jobs/new/").content.decode()

    assert 'type="hidden" name="gpu_resource" value="nvidia.com/gpu"' in html


def test_a_job_on_a_mig_slice_is_submitted_through_the_form(
    client_as, member, lead, admin, team, cluster
):
    factories.GpuCapacityFactory(
        cluster=cluster, resource_name="nvidia.com/mig-1g.10gb", allocatable=14
    )
    today = timezone.localdate()
    factories.QuotaGrantFactory(
        request__team=team,
        request__cluster=cluster,
        request__requested_by=lead,
        request__gpus=4,
        request__gpu_resource="nvidia.com/mig-1g.10gb",
        request__starts_on=today,
        request__ends_on=today + datetime.timedelta(days=30),
        granted_by=admin,
    )
    client = client_as(member)

    html = unescape(client.get("/jobs/new/").content.decode())
    response = client.post(
        "/jobs/new/",
        {
            **FORM,
            "team": team.pk,
            "cluster": cluster.pk,
            "gpus": "1",
            "gpu_resource": "nvidia.com/mig-1g.10gb",
        },
    )

    assert '<option value="nvidia.com/mig-1g.10gb">' in html
    assert response.status_code == 302, response.content.decode()[:2000]
    submitted = GpuJob.objects.get()
    assert (submitted.gpus, submitted.gpu_resource) == (1, "nvidia.com/mig-1g.10gb")


def test_a_job_beyond_the_slices_granted_is_refused_beside_the_gpus(
    client_as, member, team, cluster, grant
):
    factories.GpuCapacityFactory(
        cluster=cluster, resource_name="nvidia.com/mig-1g.10gb", allocatable=14
    )

    response = client_as(member).post(
        "/jobs/new/",
        {
            **FORM,
            "team": team.pk,
            "cluster": cluster.pk,
            "gpus": "1",
            "gpu_resource": "nvidia.com/mig-1g.10gb",
        },
    )

    assert response.status_code == 200
    assert "no nvidia.com/mig-1g.10gb quota" in unescape(response.content.decode())
    assert not GpuJob.objects.exists()


def test_list_filters_by_state_and_user(client_as, lead, member, team, cluster):
    job(team, cluster, member, name="alpha", state="running")
    job(team, cluster, lead, name="beta", state="failed")
    client = client_as(lead)

    running = client.get("/jobs/?state=running").content.decode()
    by_lead = client.get(f"/jobs/?user={lead.username}&team={team.slug}").content.decode()

    assert "alpha" in running
    assert "beta" not in running
    assert "beta" in by_lead
    assert "alpha" not in by_lead


def test_the_next_page_keeps_a_username_filter_with_a_plus(client_as, lead, team, cluster):
    ops = factories.UserFactory(username="ml+ops")
    for n in range(30):
        job(team, cluster, ops, name=f"ops-{n:02}")
    job(team, cluster, lead, name="not-ops")
    client = client_as(lead)

    first = client.get("/jobs/", {"user": "ml+ops"})
    next_link = re.search(r'href="(\?[^"]*page=2)"', first.content.decode()).group(1)
    second = client.get("/jobs/" + unescape(next_link))

    assert [j.name for j in first.context["jobs"]] == [f"ops-{n:02}" for n in range(29, 4, -1)]
    assert second.context["page"].number == 2
    assert [j.name for j in second.context["jobs"]] == [f"ops-{n:02}" for n in range(4, -1, -1)]


def test_a_bad_filter_value_is_an_error_on_the_form_and_lists_nothing(
    client_as, lead, team, cluster
):
    job(team, cluster, lead, name="alpha", state="running")

    response = client_as(lead).get("/jobs/?state=exploded")

    assert response.status_code == 200
    assert list(response.context["filter_form"].errors) == ["state"]
    assert response.context["jobs"] == []


def test_the_team_filter_offers_only_the_users_teams(client_as, lead, team, other_team):
    html = client_as(lead).get("/jobs/").content.decode()

    assert '<option value="vision">Vision</option>' in html
    assert 'value="speech"' not in html


def test_the_list_filters_by_cluster_as_the_api_does(client_as, lead, team, cluster):
    west = factories.ClusterFactory(name="gpu-west")
    job(team, cluster, lead, name="east-job")
    job(team, west, lead, name="west-job")

    jobs = client_as(lead).get("/jobs/?cluster=gpu-west").context["jobs"]

    assert [j.name for j in jobs] == ["west-job"]


def test_detail_page_polls_while_the_job_runs(client_as, member, team, cluster):
    running = job(team, cluster, member, state="running", node="gpu-node-1")

    html = client_as(member).get(f"/jobs/{running.pk}/").content.decode()

    assert f'hx-get="/jobs/{running.pk}/live/" hx-trigger="every 2s"' in html
    assert f'hx-get="/jobs/{running.pk}/logs/?tail=100"' in html
    assert 'data-testid="stop-job"' in html
    assert '<dd data-testid="job-node">gpu-node-1</dd>' in html


def test_viewer_sees_no_stop_button(client_as, viewer, member, team, cluster):
    running = job(team, cluster, member, state="running")

    html = client_as(viewer).get(f"/jobs/{running.pk}/").content.decode()

    assert 'data-testid="stop-job"' not in html


def test_finished_job_page_stops_polling(client_as, member, team, cluster):
    done = job(team, cluster, member, state="succeeded", exit_code=0)

    live = client_as(member).get(f"/jobs/{done.pk}/live/").content.decode()

    assert "hx-trigger" not in live
    assert '<dd data-testid="job-exit-code">0</dd>' in live


def test_stop_button_cancels(client_as, member, team, cluster, monkeypatch):
    from gpujobs import services

    monkeypatch.setattr(services, "enqueue_delete", lambda **kwargs: None)
    running = job(team, cluster, member, state="running")

    response = client_as(member).post(f"/jobs/{running.pk}/cancel/")

    assert response.status_code == 302
    running.refresh_from_db()
    assert running.state == "cancelled"


def test_gpu_charts_say_why_there_are_none(client_as, member, team, cluster):
    queued = job(team, cluster, member)

    html = client_as(member).get(f"/jobs/{queued.pk}/gpus/").content.decode()

    assert "has no Prometheus URL" in html


def test_team_page_shows_its_jobs_and_gpus_in_use(client_as, lead, member, team, cluster):
    job(team, cluster, member, name="trainer", state="running", gpus=3)
    job(team, cluster, member, name="waiter", state="pending", gpus=2)
    job(team, cluster, member, name="old", state="succeeded", gpus=8)

    html = client_as(lead).get(f"/teams/{team.slug}/").content.decode()

    assert 'data-testid="team-jobs"' in html
    assert "trainer" in html
    assert "waiter" in html
    in_use = html.split('data-testid="gpus-in-use"')[1].split("</table>")[0]
    assert '<td class="num">3</td><td class="num">2</td>' in in_use
    assert f'href="/jobs/new/?team={team.slug}"' in html


def test_a_team_page_shows_the_newest_unfinished_jobs_and_counts_them_all(
    client_as, lead, member, team, cluster, django_assert_max_num_queries
):
    shown = gpujob_tags.UNFINISHED_JOBS_SHOWN
    client = client_as(lead)
    for i in range(shown):
        job(team, cluster, member, name=f"waiter-{i}", state="pending", gpus=2)
    client.get(f"/teams/{team.slug}/")
    with django_assert_max_num_queries(100) as at_the_limit:
        client.get(f"/teams/{team.slug}/")
    job(team, cluster, member, name="newest", state="running", gpus=3)
    for i in range(20):
        job(team, cluster, member, name=f"older-{i}", state="queued", gpus=1)
    GpuJob.objects.filter(name__startswith="older-").update(
        created_at=timezone.now() - datetime.timedelta(days=1)
    )

    with django_assert_max_num_queries(len(at_the_limit.captured_queries)):
        html = client.get(f"/teams/{team.slug}/").content.decode()

    table = html.split('data-testid="jobs"')[1].split("</table>")[0]
    assert table.count('data-testid="job-row-') == shown
    assert "newest" in table
    assert "older-" not in table
    note = html.split('data-testid="team-jobs-shown"')[1].split("</p>")[0]
    assert f"The newest {shown} of the team's {shown + 21} unfinished jobs" in note
    in_use = html.split('data-testid="gpus-in-use"')[1].split("</table>")[0]
    assert f'<td class="num">3</td><td class="num">{2 * shown + 20}</td>' in in_use


def test_team_page_without_jobs(client_as, viewer, team):
    html = client_as(viewer).get(f"/teams/{team.slug}/").content.decode()

    assert 'data-testid="gpus-in-use-none"' in html
    assert "/jobs/new/" not in html  # viewers cannot submit


def test_django_admin_lists_jobs_read_only(client_as, member, team, cluster):
    job(team, cluster, member, name="listed")
    superuser = factories.AdminFactory(username="root-admin", is_superuser=True)

    response = client_as(superuser).get("/django-admin/gpujobs/gpujob/")

    assert response.status_code == 200
    assert "listed" in response.content.decode()
    assert client_as(superuser).get("/django-admin/gpujobs/gpujob/add/").status_code == 403
