"""A cluster's allowed registries, set by admins through the clusters API
(``PATCH /api/v1/clusters/{name}/``): the row changes in one transaction with an audit event
(before and after), and the cluster-wide reconcile is enqueued after commit, so that its
admission policies follow. Others are refused (403; a cluster that does not exist is a 404),
and bad values are a 400 naming the field that change nothing."""

import pytest

from clusters.models import Cluster
from tenants.models import AuditEvent, ClusterState, TeamCluster
from tests import factories
from workloads.admission import check_image

pytestmark = pytest.mark.django_db

CLUSTER = "/api/v1/clusters/gpu-east/"
SETTINGS_CHANGED = AuditEvent.Action.CLUSTER_SETTINGS_CHANGED


@pytest.fixture
def careful(cluster):
    """The cluster as a careful deployment has it: its own registry only."""
    cluster.allowed_registries = ["registry.example.com"]
    cluster.allow_all_registries = False
    cluster.save(update_fields=["allowed_registries", "allow_all_registries"])
    return cluster


def refused_image(cluster: Cluster, image: str) -> str | None:
    errors: dict[str, str] = {}
    check_image(image, cluster=Cluster.objects.get(pk=cluster.pk), errors=errors, key="image")
    return errors.get("image")


def test_admin_lists_the_registries_and_jobs_follow_at_once(api, admin, careful):
    image = "nvcr.io/nvidia/pytorch:24.05-py3"
    assert refused_image(careful, image)

    response = api.as_user(admin).patch(
        CLUSTER, {"allowed_registries": ["registry.example.com", "nvcr.io"]}
    )

    assert response.status_code == 200, response.data
    assert response.data["allowed_registries"] == ["registry.example.com", "nvcr.io"]
    assert response.data["allow_all_registries"] is False
    stored = Cluster.objects.get(pk=careful.pk)
    assert stored.allowed_registries == ["registry.example.com", "nvcr.io"]
    assert refused_image(careful, image) is None
    assert refused_image(careful, "ghcr.io/x/y:1")


def test_the_change_is_audited_with_the_values_before_and_after(api, admin, careful):
    api.as_user(admin).patch(
        CLUSTER, {"allowed_registries": ["nvcr.io"], "allow_all_registries": True}
    )

    event = AuditEvent.objects.get(action=SETTINGS_CHANGED)
    assert event.actor == admin
    assert (event.target_type, event.target_id) == ("Cluster", careful.pk)
    assert event.before["allowed_registries"] == ["registry.example.com"]
    assert event.after["allowed_registries"] == ["nvcr.io"]
    assert (event.before["allow_all_registries"], event.after["allow_all_registries"]) == (
        False,
        True,
    )


def test_the_cluster_reconcile_is_enqueued_after_commit(
    api, admin, careful, team, django_capture_on_commit_callbacks
):
    on_cluster = factories.TeamClusterFactory(team=team, cluster=careful, status="in_sync")

    # Captured, not run: nothing is sent before the change is committed.
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = api.as_user(admin).patch(CLUSTER, {"allowed_registries": ["nvcr.io"]})

    assert response.status_code == 200
    (enqueue,) = callbacks
    assert "request_cluster_reconcile_after_commit" in enqueue.__qualname__
    state = ClusterState.objects.get(cluster=careful)
    assert state.status == ClusterState.Status.PENDING
    assert state.reconcile_requested_at is not None
    # The registries are in the cluster's admission policies only: no team pass is asked for.
    assert TeamCluster.objects.get(pk=on_cluster.pk).status == "in_sync"


def test_allowing_every_registry_and_back(api, admin, careful):
    client = api.as_user(admin)

    opened = client.patch(CLUSTER, {"allow_all_registries": True})
    assert refused_image(careful, "ghcr.io/x/y:1") is None
    closed = client.patch(CLUSTER, {"allow_all_registries": False})

    assert (opened.status_code, closed.status_code) == (200, 200)
    assert refused_image(careful, "ghcr.io/x/y:1")
    assert Cluster.objects.get(pk=careful.pk).allowed_registries == ["registry.example.com"]
    assert AuditEvent.objects.filter(action=SETTINGS_CHANGED).count() == 2


def test_an_empty_list_allows_none(api, admin, careful):
    response = api.as_user(admin).patch(CLUSTER, {"allowed_registries": []})

    assert response.status_code == 200
    assert Cluster.objects.get(pk=careful.pk).allowed_registries == []
    assert "allows images from no registry" in refused_image(careful, "registry.example.com/x")


def test_entries_are_kept_as_given_less_blanks_trailing_slashes_and_repeats(api, admin, careful):
    response = api.as_user(admin).patch(
        CLUSTER,
        {"allowed_registries": [" nvcr.io/ ", "NVCR.IO", "docker.io/library", "nvcr.io"]},
    )

    assert response.status_code == 200
    assert Cluster.objects.get(pk=careful.pk).allowed_registries == ["nvcr.io", "docker.io/library"]


def test_setting_what_it_already_has_records_and_enqueues_nothing(
    api, admin, careful, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = api.as_user(admin).patch(
            CLUSTER, {"allowed_registries": ["registry.example.com"], "allow_all_registries": False}
        )

    assert response.status_code == 200
    assert callbacks == []
    assert not AuditEvent.objects.filter(action=SETTINGS_CHANGED).exists()


def test_members_read_the_registries_of_a_cluster(api, member, careful):
    response = api.as_user(member).get(CLUSTER)

    assert response.status_code == 200
    assert response.data["allowed_registries"] == ["registry.example.com"]
    assert response.data["allow_all_registries"] is False


@pytest.mark.parametrize("user_fixture", ["lead", "member", "viewer", "outsider"])
def test_only_admins_change_the_registries(api, request, admin, careful, user_fixture):
    body = {"allowed_registries": ["nvcr.io"]}
    client = api.as_user(request.getfixturevalue(user_fixture))

    response = client.patch(CLUSTER, body)
    opened = client.patch(CLUSTER, {"allow_all_registries": True})

    assert (response.status_code, opened.status_code) == (403, 403)
    assert "Only portal admins" in response.data["detail"]
    stored = Cluster.objects.get(pk=careful.pk)
    assert (stored.allowed_registries, stored.allow_all_registries) == (
        ["registry.example.com"],
        False,
    )
    assert not AuditEvent.objects.filter(action=SETTINGS_CHANGED).exists()
    # The same request is an admin's to make: the refusal was about who asked.
    assert api.as_user(admin).patch(CLUSTER, body).status_code == 200
    assert Cluster.objects.get(pk=careful.pk).allowed_registries == ["nvcr.io"]


def test_a_cluster_that_does_not_exist_is_a_404_before_any_check(api, member, admin, careful):
    body = {"allowed_registries": ["nvcr.io"]}

    assert api.as_user(member).patch("/api/v1/clusters/nowhere/", body).status_code == 404
    assert api.as_user(admin).patch("/api/v1/clusters/nowhere/", body).status_code == 404
    assert api.patch(CLUSTER, body).status_code == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"allowed_registries": ["nvidia"]}, "allowed_registries"),  # a Docker Hub path
        ({"allowed_registries": ["https://nvcr.io"]}, "allowed_registries"),
        ({"allowed_registries": ["nvcr.io/NVIDIA"]}, "allowed_registries"),  # upper-case path
        ({"allowed_registries": ["nvcr.io", ""]}, "allowed_registries"),
        ({"allowed_registries": ["nvcr.io x"]}, "allowed_registries"),
        ({"allowed_registries": "nvcr.io"}, "allowed_registries"),
        ({"allowed_registries": [1]}, "allowed_registries"),
        ({"allowed_registries": None}, "allowed_registries"),
        ({"allowed_registries": [f"r{n}.example.com" for n in range(51)]}, "allowed_registries"),
        ({"allowed_registries": ["a" * 250 + ".example.com"]}, "allowed_registries"),
        ({"allow_all_registries": "yes"}, "allow_all_registries"),
        ({"allow_all_registries": 1}, "allow_all_registries"),
        ({"allow_all_registries": None}, "allow_all_registries"),
        ({"allow_all_registries": ["true"]}, "allow_all_registries"),
    ],
)
def test_a_bad_value_is_a_400_naming_the_field_and_changes_nothing(
    api, admin, careful, body, field
):
    response = api.as_user(admin).patch(CLUSTER, body)

    assert response.status_code == 400
    assert list(response.data) == [field]
    stored = Cluster.objects.get(pk=careful.pk)
    assert (stored.allowed_registries, stored.allow_all_registries) == (
        ["registry.example.com"],
        False,
    )
    assert not AuditEvent.objects.exists()


def test_a_bad_list_names_the_bad_entry_and_the_rule(api, admin, careful):
    response = api.as_user(admin).patch(CLUSTER, {"allowed_registries": ["nvcr.io", "nvidia"]})

    (message,) = response.data["allowed_registries"]
    assert "Not a registry: 'nvidia'" in message
    assert "starts with a registry host" in message


def test_a_bad_registry_beside_a_mode_switch_changes_neither(api, admin, careful):
    response = api.as_user(admin).patch(
        CLUSTER, {"quota_mode": "kueue", "allowed_registries": ["nvidia"]}
    )

    assert response.status_code == 400
    stored = Cluster.objects.get(pk=careful.pk)
    assert (stored.quota_mode, stored.allowed_registries) == ("quota", ["registry.example.com"])
    assert not AuditEvent.objects.exists()


def test_registries_and_the_mode_change_together(api, admin, careful):
    response = api.as_user(admin).patch(
        CLUSTER, {"quota_mode": "kueue", "allowed_registries": ["nvcr.io"]}
    )

    assert response.status_code == 200
    stored = Cluster.objects.get(pk=careful.pk)
    assert (stored.quota_mode, stored.allowed_registries) == ("kueue", ["nvcr.io"])
    assert set(AuditEvent.objects.values_list("action", flat=True)) == {
        "cluster.settings_changed",
        "cluster.quota_mode_changed",
    }


def test_a_setting_refused_after_the_registries_takes_them_back(api, admin, careful):
    # The overcommit ratio's range is the service's rule, checked once the registries are set.
    response = api.as_user(admin).patch(
        CLUSTER, {"allowed_registries": ["nvcr.io"], "overcommit_ratio": "150"}
    )

    assert response.status_code == 400
    assert list(response.data) == ["overcommit_ratio"]
    assert Cluster.objects.get(pk=careful.pk).allowed_registries == ["registry.example.com"]
    assert not AuditEvent.objects.exists()
    assert not ClusterState.objects.filter(cluster=careful).exists()
    # With a ratio in range both are set, the registries first.
    both = api.patch(CLUSTER, {"allowed_registries": ["nvcr.io"], "overcommit_ratio": "1.50"})
    assert both.status_code == 200
    stored = Cluster.objects.get(pk=careful.pk)
    assert (stored.allowed_registries, str(stored.overcommit_ratio)) == (["nvcr.io"], "1.50")
