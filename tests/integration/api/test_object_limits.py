"""A team's own object caps on a cluster: set by an admin through the service (the Django admin
calls it), audited, checked, and written into the team's quota by the reconcile over the
cluster's caps and the built-in ones."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from reconcile import desired_state
from tenants import object_limits
from tenants.models import AuditEvent, TeamObjectLimits
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser(db):
    return factories.AdminFactory(username="root", is_superuser=True)


def quota_of(team, cluster) -> dict:
    (state,) = desired_state.team_states(teams=[team], cluster=cluster).values()
    return dict(state.object_limits)


def test_the_quota_takes_the_built_in_caps_the_clusters_and_the_teams(admin, team):
    cluster = factories.ClusterFactory(object_limits={"services": "30", "secrets": "10"})

    object_limits.team_object_limits_set(
        actor=admin, team=team, cluster=cluster, limits={"secrets": 40, "pods": "20"}
    )

    caps = quota_of(team, cluster)
    assert caps["services"] == "30"  # the cluster's
    assert caps["secrets"] == "40"  # the team's, over the cluster's
    assert caps["pods"] == "20"
    assert caps["count/jobs.batch"] == "200"  # built in
    event = AuditEvent.objects.get(action=AuditEvent.Action.TEAM_OBJECT_LIMITS_SET)
    assert event.after["limits"] == {"secrets": "40", "pods": "20"}


def test_clearing_a_teams_caps_goes_back_to_the_clusters(admin, team, cluster):
    object_limits.team_object_limits_set(
        actor=admin, team=team, cluster=cluster, limits={"services": "5"}
    )

    object_limits.team_object_limits_set(actor=admin, team=team, cluster=cluster, limits={})

    assert not TeamObjectLimits.objects.exists()
    assert quota_of(team, cluster)["services"] == "50"


def test_bad_caps_are_refused_naming_the_field_and_change_nothing(admin, team, cluster):
    with pytest.raises(ValidationError) as refused:
        object_limits.team_object_limits_set(
            actor=admin, team=team, cluster=cluster, limits={"services": "many"}
        )

    assert "services: 'many' is not a whole number" in refused.value.message_dict["limits"][0]
    assert not TeamObjectLimits.objects.exists()
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.TEAM_OBJECT_LIMITS_SET).exists()


def test_only_admins_change_a_teams_caps(lead, team, cluster):
    with pytest.raises(PermissionDenied):
        object_limits.team_object_limits_set(
            actor=lead, team=team, cluster=cluster, limits={"services": "500"}
        )


def test_the_admin_page_sets_a_teams_caps_through_the_service(client_as, superuser, team, cluster):
    response = client_as(superuser).post(
        "/django-admin/tenants/teamobjectlimits/add/",
        {"team": team.pk, "cluster": cluster.pk, "limits": '{"persistentvolumeclaims": "60"}'},
    )

    assert response.status_code == 302
    assert TeamObjectLimits.objects.get(team=team).limits == {"persistentvolumeclaims": "60"}
    assert AuditEvent.objects.filter(action=AuditEvent.Action.TEAM_OBJECT_LIMITS_SET).exists()


def test_the_admin_page_shows_bad_caps_as_a_form_error(client_as, superuser, team, cluster):
    response = client_as(superuser).post(
        "/django-admin/tenants/teamobjectlimits/add/",
        {"team": team.pk, "cluster": cluster.pk, "limits": '{"gpus": "60"}'},
    )

    assert response.status_code == 200
    (error,) = response.context["adminform"].form.errors["limits"]
    assert "Unknown resource 'gpus'" in error
