"""The job API's rules, without a cluster: who may submit, what a job may ask for, which rule
refused it and by how much, and what each user may list. Nothing here is enqueued (the test's
transaction never commits), so no worker or cluster is involved."""

import datetime
import threading

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from gpujobs import services
from gpujobs.models import GpuJob
from gpujobs.specs import JobRequest
from tenants.models import AuditEvent, Membership
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


@pytest.fixture
def other_grant(other_team, cluster, other_lead, admin):
    return factories.QuotaGrantFactory(
        request__team=other_team,
        request__cluster=cluster,
        request__requested_by=other_lead,
        request__gpus=4,
        request__starts_on=timezone.localdate(),
        granted_by=admin,
    )


def body(**overrides):
    data = {
        "team": "vision",
        "cluster": "gpu-east",
        "name": "bert-finetune",
        "image": "registry.example.com/vision/trainer:1.4",
        "command": ["python", "train.py"],
        "args": ["--epochs", "3", "--note", "a b; c"],
        "env": [{"name": "LR", "value": "3e-4"}],
        "gpus": 2,
    }
    data.update(overrides)
    return data


def test_member_submits_a_job_that_is_queued(api, member, grant):
    response = api.as_user(member).post("/api/v1/jobs/", body())

    assert response.status_code == 201, response.data
    data = response.data
    assert data["state"] == "queued"
    assert data["team"] == "vision"
    assert data["cluster"] == "gpu-east"
    assert data["submitted_by"] == "mo-member"
    assert data["command"] == ["python", "train.py"]
    assert data["args"] == ["--epochs", "3", "--note", "a b; c"]
    assert data["env"] == [{"name": "LR", "value": "3e-4"}]
    assert data["max_runtime_seconds"] == 86400
    assert data["kubernetes"] == {
        "namespace": "vision",
        "job_name": f"gpujob-{data['id']}",
        "uid": "",
    }
    assert AuditEvent.objects.filter(action="gpu_job.submitted", target_id=data["id"]).exists()


def test_lead_submits_too(api, lead, grant):
    assert api.as_user(lead).post("/api/v1/jobs/", body()).status_code == 201


def test_viewer_cannot_submit(api, viewer, grant):
    response = api.as_user(viewer).post("/api/v1/jobs/", body())

    assert response.status_code == 403
    assert not GpuJob.objects.exists()


def test_user_of_another_team_cannot_name_this_team(api, other_lead, grant):
    response = api.as_user(other_lead).post("/api/v1/jobs/", body())

    assert response.status_code == 400
    assert "team" in response.data


def test_job_over_the_remaining_quota_says_how_much_is_left_and_by_how_much_it_is_over(
    api, member, grant, team, cluster
):
    GpuJob.objects.create(
        team=team,
        cluster=cluster,
        submitted_by=member,
        name="running",
        image="x",
        gpus=3,
        max_runtime_seconds=60,
        state="running",
    )

    response = api.as_user(member).post("/api/v1/jobs/", body(gpus=2))

    assert response.status_code == 400
    assert response.data["gpus"] == [
        "The team's GPU quota is used up: team vision has 4 × nvidia.com/gpu on cluster "
        "gpu-east, 3 held by its unfinished jobs, so 1 left; this job asks for 2, exceeding "
        "it by 1."
    ]


@pytest.mark.parametrize("state", ["succeeded", "failed", "cancelled"])
def test_finished_jobs_hold_no_quota(api, member, grant, team, cluster, state):
    GpuJob.objects.create(
        team=team,
        cluster=cluster,
        submitted_by=member,
        name="done",
        image="x",
        gpus=4,
        max_runtime_seconds=60,
        state=state,
    )

    assert api.as_user(member).post("/api/v1/jobs/", body(gpus=4)).status_code == 201


def test_grants_not_in_effect_today_do_not_count(api, member, team, cluster, lead, admin):
    tomorrow = timezone.localdate() + datetime.timedelta(days=1)
    factories.QuotaGrantFactory(
        request__team=team,
        request__cluster=cluster,
        request__requested_by=lead,
        request__gpus=4,
        request__starts_on=tomorrow,
        granted_by=admin,
    )

    response = api.as_user(member).post("/api/v1/jobs/", body(gpus=1))

    assert response.status_code == 400
    assert "no nvidia.com/gpu quota in effect" in response.data["gpus"][0]


def test_image_outside_the_clusters_allowed_registries_is_refused(api, member, grant, cluster):
    cluster.allowed_registries = ["registry.example.com/speech/", "nvcr.io"]
    cluster.allow_all_registries = False
    cluster.save()

    response = api.as_user(member).post("/api/v1/jobs/", body())

    assert response.status_code == 400
    assert response.data["image"] == [
        "Image registry.example.com/vision/trainer:1.4 is pulled from registry.example.com, "
        "which cluster gpu-east does not allow. Allowed registries: "
        "registry.example.com/speech/, nvcr.io."
    ]


def test_image_inside_the_allowed_registries_is_accepted(api, member, grant, cluster):
    cluster.allowed_registries = ["registry.example.com/vision"]
    cluster.allow_all_registries = False
    cluster.save()

    assert api.as_user(member).post("/api/v1/jobs/", body()).status_code == 201


def test_preprocessing_image_is_held_to_the_registries_too(api, member, grant, cluster):
    cluster.allowed_registries = ["registry.example.com"]
    cluster.allow_all_registries = False
    cluster.save()

    response = api.as_user(member).post(
        "/api/v1/jobs/", body(preprocess={"image": "docker.io/evil/cleaner", "mode": "beside"})
    )

    assert response.status_code == 400
    assert "does not allow" in response.data["preprocess"][0]


def test_a_cluster_that_lists_no_registry_allows_none(api, member, grant, cluster):
    cluster.allowed_registries = []
    cluster.allow_all_registries = False
    cluster.save()

    response = api.as_user(member).post("/api/v1/jobs/", body())

    assert response.status_code == 400
    assert "allows images from no registry yet" in response.data["image"][0]


def test_docker_hub_references_are_read_as_the_runtime_reads_them(api, member, grant, cluster):
    cluster.allowed_registries = ["docker.io/library"]
    cluster.allow_all_registries = False
    cluster.save()

    official = api.as_user(member).post("/api/v1/jobs/", body(image="busybox:1.36"))
    organisation = api.as_user(member).post("/api/v1/jobs/", body(image="nvidia/cuda:12"))

    assert official.status_code == 201
    assert organisation.status_code == 400
    assert "pulled from docker.io" in organisation.data["image"][0]


@pytest.mark.parametrize("name", ["NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"])
def test_a_job_may_not_set_nvidia_variables(api, member, grant, name):
    response = api.as_user(member).post("/api/v1/jobs/", body(env=[{"name": name, "value": "all"}]))

    assert response.status_code == 400
    assert "NVIDIA_* variables decide which GPUs a container sees" in response.data["env"][0]
    assert not GpuJob.objects.exists()


def test_every_bad_field_is_named_at_once(api, member, grant):
    response = api.as_user(member).post(
        "/api/v1/jobs/",
        body(
            name="-bad-",
            image="Not An Image",
            env=[{"name": "1X", "value": "y"}],
            gpu_model="NVIDIA-B200",
            max_runtime_seconds=0,
            annotations={"kubernetes.io/psp": "x"},
        ),
    )

    assert response.status_code == 400
    assert set(response.data) == {
        "name",
        "image",
        "env",
        "gpu_model",
        "max_runtime_seconds",
        "annotations",
    }
    assert "no NVIDIA-B200 GPUs; it has: NVIDIA-A100-SXM4-80GB" in response.data["gpu_model"][0]


def test_command_as_a_shell_string_is_refused(api, member, grant):
    response = api.as_user(member).post("/api/v1/jobs/", body(command="python train.py"))

    assert response.status_code == 400
    assert "command" in response.data


def test_unknown_gpu_kind_is_refused(api, member, grant):
    response = api.as_user(member).post("/api/v1/jobs/", body(gpu_resource="amd.com/gpu"))

    assert response.status_code == 400
    assert "offers: nvidia.com/gpu" in response.data["gpu_resource"][0]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("gpus", 0),
        ("gpus", "two"),
        ("cpu_cores", "-1"),
        ("memory_gib", "0"),
        ("backoff_limit", 11),
        ("max_runtime_seconds", 31 * 24 * 3600),
    ],
)
def test_out_of_range_numbers_are_refused(api, member, grant, field, value):
    response = api.as_user(member).post("/api/v1/jobs/", body(**{field: value}))

    assert response.status_code == 400
    assert field in response.data


def test_admin_who_is_not_a_member_cannot_submit(api, admin, grant):
    assert api.as_user(admin).post("/api/v1/jobs/", body()).status_code == 403


def test_archived_team_cannot_run_jobs(api, member, grant, team):
    team.archived_at = timezone.now()
    team.save()

    response = api.as_user(member).post("/api/v1/jobs/", body())

    assert response.status_code == 400
    assert "archived" in response.data["team"][0]


@pytest.mark.parametrize("owned", [None, True])
def test_a_namespace_not_known_as_someone_elses_takes_jobs(
    api, member, grant, team, cluster, owned
):
    factories.TeamClusterFactory(team=team, cluster=cluster, namespace_owned=owned)

    assert api.as_user(member).post("/api/v1/jobs/", body()).status_code == 201


def test_a_namespace_the_reconcile_found_someone_elses_takes_no_job(
    api, member, grant, team, cluster
):
    factories.TeamClusterFactory(team=team, cluster=cluster, namespace_owned=False)

    response = api.as_user(member).post("/api/v1/jobs/", body())

    assert response.status_code == 400
    assert response.data["cluster"] == [
        "Namespace vision on cluster gpu-east was not created by the portal for team vision, so "
        "the portal runs no job in it. A cluster admin must delete or rename it (or the team "
        "needs another slug)."
    ]
    assert not GpuJob.objects.exists()


# --- lists -------------------------------------------------------------------------------------


def job(team, cluster, user, **kwargs):
    kwargs.setdefault("name", "j")
    return GpuJob.objects.create(
        team=team,
        cluster=cluster,
        submitted_by=user,
        image="x",
        gpus=1,
        max_runtime_seconds=60,
        **kwargs,
    )


def test_lists_only_the_users_teams_jobs(api, member, other_lead, team, other_team, cluster):
    mine = job(team, cluster, member)
    job(other_team, cluster, other_lead)

    response = api.as_user(member).get("/api/v1/jobs/")

    assert [j["id"] for j in response.data["results"]] == [mine.pk]


def test_admin_lists_every_job(api, admin, member, other_lead, team, other_team, cluster):
    job(team, cluster, member)
    job(other_team, cluster, other_lead)

    assert api.as_user(admin).get("/api/v1/jobs/").data["count"] == 2


def test_list_filters_by_team_state_and_user(api, lead, member, team, cluster):
    a = job(team, cluster, member, state="running")
    b = job(team, cluster, lead, state="succeeded")
    c = job(team, cluster, member, state="failed")
    client = api.as_user(lead)

    def ids(query):
        return sorted(j["id"] for j in client.get(f"/api/v1/jobs/?{query}").data["results"])

    assert ids("team=vision") == sorted([a.pk, b.pk, c.pk])
    assert ids("team=speech") == []
    assert ids("state=running") == [a.pk]
    assert ids("state=running&state=failed") == sorted([a.pk, c.pk])
    assert ids("user=mo-member") == sorted([a.pk, c.pk])
    assert ids("user=lena-lead&state=succeeded") == [b.pk]
    assert client.get("/api/v1/jobs/?state=exploded").status_code == 400


def test_list_costs_the_same_queries_for_any_number_of_jobs(api, member, team, cluster):
    from django.db import connection

    job(team, cluster, member)
    client = api.as_user(member)
    with CaptureQueriesContext(connection) as one:
        client.get("/api/v1/jobs/")
    for _ in range(20):
        job(team, cluster, member)
    with CaptureQueriesContext(connection) as many:
        client.get("/api/v1/jobs/")

    assert len(many) == len(one)


def test_another_teams_job_is_404_everywhere(api, other_lead, member, team, cluster):
    theirs = job(team, cluster, member)
    client = api.as_user(other_lead)

    for method, path in [
        ("get", f"/api/v1/jobs/{theirs.pk}/"),
        ("post", f"/api/v1/jobs/{theirs.pk}/cancel/"),
        ("get", f"/api/v1/jobs/{theirs.pk}/logs/?tail=5"),
        ("get", f"/api/v1/jobs/{theirs.pk}/events/"),
    ]:
        assert getattr(client, method)(path).status_code == 404, path
    theirs.refresh_from_db()
    assert theirs.state == "queued"


def test_schema_describes_the_job_endpoints(api, outsider):
    schema = api.as_user(outsider).get("/api/v1/schema/?format=json").json()

    for path in [
        "/api/v1/jobs/",
        "/api/v1/jobs/{id}/",
        "/api/v1/jobs/{id}/cancel/",
        "/api/v1/jobs/{id}/logs/",
        "/api/v1/jobs/{id}/events/",
    ]:
        assert path in schema["paths"], path


# --- the quota check holds under concurrent submissions -----------------------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_submissions_never_exceed_the_quota(monkeypatch):
    monkeypatch.setattr(services, "enqueue_submits", lambda **kwargs: None)
    cluster = factories.ClusterFactory(name="race")
    factories.GpuCapacityFactory(cluster=cluster)
    team = factories.TeamFactory(slug="racers")
    users = []
    for i in range(4):
        user = factories.UserFactory(username=f"racer-{i}")
        Membership.objects.create(team=team, user=user, role="member")
        users.append(user)
    factories.QuotaGrantFactory(
        request__team=team,
        request__cluster=cluster,
        request__gpus=2,
        request__starts_on=timezone.localdate(),
    )
    barrier = threading.Barrier(len(users))
    outcomes: list = [None] * len(users)

    def run(index, user):
        try:
            barrier.wait(timeout=30)
            outcomes[index] = services.job_submit(
                user=user,
                team=team,
                cluster=cluster,
                job_request=JobRequest.parse({"name": f"r{index}", "image": "img", "gpus": 1}),
            )
        except Exception as error:
            outcomes[index] = error
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i, u)) for i, u in enumerate(users)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    made = [o for o in outcomes if isinstance(o, GpuJob)]
    refused = [o for o in outcomes if isinstance(o, ValidationError)]
    assert len(made) == 2, outcomes
    assert len(refused) == 2, outcomes
    assert GpuJob.objects.filter(team=team).count() == 2


def test_services_refuse_a_viewer_directly(viewer, team, cluster, grant):
    with pytest.raises(PermissionDenied):
        services.job_submit(
            user=viewer,
            team=team,
            cluster=cluster,
            job_request=JobRequest.parse({"name": "x", "image": "x", "gpus": 1}),
        )


# --- many jobs in one submission ---------------------------------------------------------------


def batch_body(*jobs, **overrides):
    data = {"team": "vision", "cluster": "gpu-east", "jobs": list(jobs)}
    data.update(overrides)
    return data


def job_fields(**overrides):
    fields = body(**overrides)
    del fields["team"], fields["cluster"]
    return fields


def test_member_submits_many_jobs_in_one_call(api, member, grant):
    jobs = [job_fields(name=f"sweep-{i}", gpus=1, args=["--lr", f"{i}e-4"]) for i in range(3)]

    response = api.as_user(member).post("/api/v1/jobs/batch/", batch_body(*jobs))

    assert response.status_code == 201, response.data
    made = response.data["jobs"]
    assert [j["name"] for j in made] == ["sweep-0", "sweep-1", "sweep-2"]
    assert [j["args"] for j in made] == [["--lr", "0e-4"], ["--lr", "1e-4"], ["--lr", "2e-4"]]
    assert {j["state"] for j in made} == {"queued"}
    assert made[0]["submitted_by"] == "mo-member"
    # Each as the job's own page of the API shows it.
    detail = api.as_user(member).get(f"/api/v1/jobs/{made[1]['id']}/").data
    assert made[1] == detail
    ids = [j["id"] for j in made]
    audited = AuditEvent.objects.filter(action="gpu_job.submitted", target_id__in=ids)
    assert sorted(audited.values_list("target_id", flat=True)) == sorted(ids)
    assert {e.after["name"] for e in audited} == {"sweep-0", "sweep-1", "sweep-2"}


def test_a_batch_with_a_bad_job_names_it_by_its_place_and_stores_none(api, member, grant, cluster):
    cluster.allowed_registries = ["registry.example.com"]
    cluster.allow_all_registries = False
    cluster.save()
    jobs = [
        job_fields(name="good", gpus=1),
        job_fields(name="bad", gpus=1, image="docker.io/evil/miner:1"),
        job_fields(name="", gpus=0),
    ]

    response = api.as_user(member).post("/api/v1/jobs/batch/", batch_body(*jobs))

    assert response.status_code == 400
    first, second, third = response.data["jobs"]
    assert first == {}
    assert list(second) == ["image"]
    assert "registry.example.com" in str(second["image"][0])
    assert set(third) == {"name", "gpus"}
    assert not GpuJob.objects.exists()
    assert not AuditEvent.objects.filter(action="gpu_job.submitted").exists()


def test_jobs_that_fit_one_by_one_but_not_together_are_refused_together(
    api, member, grant, team, cluster
):
    jobs = [job_fields(name=f"j{i}", gpus=2) for i in range(3)]  # 6 of the grant's 4

    response = api.as_user(member).post("/api/v1/jobs/batch/", batch_body(*jobs))

    assert response.status_code == 400
    assert response.data["jobs"] == [
        "The team's GPU quota is used up: team vision has 4 × nvidia.com/gpu on cluster "
        "gpu-east, 0 held by its unfinished jobs, so 4 left; these 3 jobs ask for 6, exceeding "
        "it by 2."
    ]
    assert not GpuJob.objects.exists()


def test_a_viewer_cannot_submit_a_batch(api, viewer, grant):
    response = api.as_user(viewer).post("/api/v1/jobs/batch/", batch_body(job_fields(gpus=1)))

    assert response.status_code == 403
    assert not GpuJob.objects.exists()


def test_a_batch_for_another_team_is_refused_naming_the_team(api, other_lead, grant):
    response = api.as_user(other_lead).post("/api/v1/jobs/batch/", batch_body(job_fields(gpus=1)))

    assert response.status_code == 400
    assert "team" in response.data
    assert not GpuJob.objects.exists()


@pytest.mark.parametrize("jobs", [[], None, "a job", {"name": "x"}, [{}] * 1001])
def test_a_batch_needs_a_list_of_1_to_1000_jobs(api, member, grant, jobs):
    response = api.as_user(member).post("/api/v1/jobs/batch/", batch_body(jobs=jobs))

    assert response.status_code == 400
    assert response.data["jobs"] == ["A list of 1 to 1000 jobs is required."]


def test_a_batch_item_that_is_not_an_object_is_named(api, member, grant):
    response = api.as_user(member).post(
        "/api/v1/jobs/batch/", batch_body(job_fields(gpus=1), ["not", "a", "job"])
    )

    assert response.status_code == 400
    assert response.data["jobs"][0] == {}
    assert "non_field_errors" in response.data["jobs"][1]


def test_a_batch_costs_the_same_queries_for_any_number_of_alike_jobs(api, member, team, cluster):
    factories.QuotaGrantFactory(
        request__team=team,
        request__cluster=cluster,
        request__gpus=100,
        request__starts_on=timezone.localdate(),
    )
    client = api.as_user(member)

    def queries(count: int) -> tuple[int, int]:
        """(reads and other statements, inserts): SQLite splits a large insert in several."""
        jobs = [job_fields(name=f"q{i}", gpus=1, args=[str(i)]) for i in range(count)]
        with CaptureQueriesContext(connections["default"]) as captured:
            response = client.post("/api/v1/jobs/batch/", batch_body(*jobs))
        assert response.status_code == 201, response.data
        inserts = sum(1 for q in captured.captured_queries if q["sql"].startswith("INSERT"))
        return len(captured) - inserts, inserts

    few, many = queries(2), queries(40)
    assert few[0] == many[0]
    assert many[1] <= 4  # the jobs' rows and their audit events, in as few statements
