"""Asking for, withdrawing and deciding sharing layouts, and how a layout changes the grants
when the cluster followed (``grants.convert``) and when it is reverted (``grants.give_back``)."""

import datetime

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from sharing import grants, services
from sharing.models import LayoutRequest
from tenants import quota
from tenants.errors import InvalidTransition
from tenants.models import AuditEvent, QuotaGrant
from tests import factories
from tests.integration.sharing.conftest import A100
from webhooks.models import Delivery

pytestmark = pytest.mark.django_db
State = LayoutRequest.State


def ask(lead, grant, today, **overrides):
    fields = {
        "requested_by": lead,
        "team": grant.team,
        "source_grant": grant,
        "gpus": 2,
        "kind": "mig",
        "mig_profile": "1g.10gb",
        "ends_on": today + datetime.timedelta(days=7),
        "justification": "Notebooks.",
        **overrides,
    }
    return services.layout_create(**fields)


def errors_of(excinfo) -> dict:
    return excinfo.value.message_dict


def test_a_lead_asks_for_two_a100_as_fourteen_1g_10gb_slices(lead, a100_grant, today):
    layout = ask(lead, a100_grant, today)

    assert (layout.state, layout.slices, layout.slice_resource) == (
        State.PENDING,
        14,
        "nvidia.com/mig-1g.10gb",
    )
    assert layout.gpu_model == A100
    event = AuditEvent.objects.get(action=AuditEvent.Action.LAYOUT_REQUESTED)
    assert event.after["gpus"] == 2
    assert event.target_id == layout.pk


def test_shared_replicas_make_replicas_per_gpu(lead, a100_grant, today):
    layout = ask(lead, a100_grant, today, kind="shared", mig_profile="", replicas=4, gpus=3)

    assert (layout.slices, layout.slice_resource) == (12, "nvidia.com/gpu.shared")


def test_a_member_cannot_ask(member, a100_grant, today):
    with pytest.raises(PermissionDenied):
        ask(member, a100_grant, today)


@pytest.mark.parametrize(
    ("overrides", "field", "words"),
    [
        ({"gpus": 5}, "gpus", "at most 4 can be converted"),
        ({"mig_profile": "1g.5gb"}, "mig_profile", "Its profiles are: 1g.10gb"),
        ({"kind": "shared", "mig_profile": "", "replicas": 3}, "replicas", "2, 4, 8"),
        ({"kind": "time-slicing"}, "kind", "'mig'"),
        ({"ends_on": datetime.date(2000, 1, 1)}, "ends_on", "in the past"),
        ({"ends_on": datetime.date(2999, 1, 1)}, "ends_on", "grant #"),
        ({"justification": "  "}, "justification", "what the slices are for"),
    ],
)
def test_bad_input_is_refused_naming_the_field(lead, a100_grant, today, overrides, field, words):
    with pytest.raises(ValidationError) as excinfo:
        ask(lead, a100_grant, today, **overrides)

    assert words in " ".join(errors_of(excinfo)[field])
    assert not LayoutRequest.objects.exists()


def test_a_grant_that_is_not_the_team_s_or_not_whole_gpus_of_a_model_is_refused(
    lead, team, other_team, cluster, admin, a100_grant, today
):
    others = factories.QuotaGrantFactory(request__team=other_team, request__gpu_model=A100)
    sliced = factories.QuotaGrantFactory(
        request__team=team, request__gpu_resource="nvidia.com/mig-1g.10gb", request__gpu_model=A100
    )
    any_model = factories.QuotaGrantFactory(request__team=team, request__gpu_model="")
    revoked = factories.QuotaGrantFactory(
        request__team=team, request__gpu_model=A100, state=QuotaGrant.State.REVOKED
    )
    for grant, words in [
        (others, "not one of vision's grants"),
        (sliced, "only whole GPUs"),
        (any_model, "any GPU model"),
        (revoked, "is revoked"),
    ]:
        with pytest.raises(ValidationError) as excinfo:
            ask(lead, grant, today, team=team)
        assert words in " ".join(errors_of(excinfo)["source_grant"])


def test_gpus_already_asked_for_by_another_layout_are_not_offered_twice(lead, a100_grant, today):
    ask(lead, a100_grant, today, gpus=3)

    with pytest.raises(ValidationError) as excinfo:
        ask(lead, a100_grant, today, gpus=2)

    assert "3 of them in other layout requests" in errors_of(excinfo)["gpus"][0]


def test_the_requester_cancels_a_pending_layout_once(lead, pending_layout):
    services.layout_cancel(actor=lead, layout=pending_layout)

    pending_layout.refresh_from_db()
    assert pending_layout.state == State.CANCELLED
    with pytest.raises(InvalidTransition):
        services.layout_cancel(actor=lead, layout=pending_layout)


def test_an_admin_rejects_with_a_note(admin, pending_layout):
    with pytest.raises(ValidationError) as excinfo:
        services.layout_reject(reviewer=admin, layout=pending_layout, note=" ")
    assert "note" in errors_of(excinfo)

    services.layout_reject(reviewer=admin, layout=pending_layout, note="Not this month.")

    pending_layout.refresh_from_db()
    assert (pending_layout.state, pending_layout.decided_by) == (State.REJECTED, admin)


def test_the_teams_webhooks_hear_of_a_decision_but_not_of_the_request(admin, pending_layout):
    hook = factories.WebhookFactory(team=pending_layout.team, events=["sharing_layout.changed"])
    assert not Delivery.objects.exists()  # asked before the webhook existed; asking tells none

    services.layout_reject(reviewer=admin, layout=pending_layout, note="Not this month.")

    (delivery,) = Delivery.objects.all()
    payload = delivery.payload
    assert (delivery.webhook, delivery.event) == (hook, "sharing_layout.changed")
    assert payload["data"]["layout_id"] == pending_layout.pk
    assert payload["data"]["state"] == "rejected"
    assert payload["title"].startswith(f"Sharing layout #{pending_layout.pk} (")
    assert payload["title"].endswith("rejected: Not this month.")


def test_only_portal_admins_decide_and_never_their_own(lead, dept_admin, pending_layout):
    with pytest.raises(PermissionDenied):
        services.layout_approve(reviewer=lead, layout=pending_layout)
    with pytest.raises(PermissionDenied):
        services.layout_approve(reviewer=dept_admin, layout=pending_layout)
    lead.is_staff = True
    lead.save()
    with pytest.raises(PermissionDenied, match="asked for yourself"):
        services.layout_approve(reviewer=lead, layout=pending_layout)


def test_approving_enqueues_the_apply_task_after_commit(
    admin, pending_layout, django_capture_on_commit_callbacks, monkeypatch
):
    sent = []
    monkeypatch.setattr(services, "send_task", lambda name, **kw: sent.append((name, kw)))

    with django_capture_on_commit_callbacks(execute=True):
        services.layout_approve(reviewer=admin, layout=pending_layout, note="Go.")

    pending_layout.refresh_from_db()
    assert pending_layout.state == State.APPROVED
    assert sent == [("apply_layout", {"layout_id": pending_layout.pk})]


def test_approving_a_layout_whose_grant_was_revoked_meanwhile_is_refused(
    admin, pending_layout, a100_grant
):
    quota.quota_grant_revoke(actor=admin, grant=a100_grant)

    with pytest.raises(ValidationError) as excinfo:
        services.layout_approve(reviewer=admin, layout=pending_layout)

    assert "source_grant" in errors_of(excinfo)
    pending_layout.refresh_from_db()
    assert pending_layout.state == State.PENDING


# --- what the grants become --------------------------------------------------------------------


def applied(layout, admin) -> LayoutRequest:
    layout.state = State.APPLYING
    layout.decided_by = admin
    layout.save()
    assert grants.convert(layout) is None
    layout.state = State.APPLIED
    layout.save()
    return layout


def test_applied_the_source_gives_up_the_gpus_and_a_slice_grant_is_made(
    admin, pending_layout, a100_grant, today
):
    layout = applied(pending_layout, admin)

    a100_grant.refresh_from_db()
    assert (a100_grant.state, a100_grant.gpus) == (QuotaGrant.State.ACTIVE, 2)
    slices = layout.slice_grant
    assert (slices.gpu_resource, slices.gpu_model, slices.gpus) == (
        "nvidia.com/mig-1g.10gb",
        A100,
        14,
    )
    assert (slices.starts_on, slices.ends_on) == (today, layout.ends_on)
    assert f"Sharing layout #{layout.pk}" in slices.request.justification
    assert slices.request.state == "approved"


def test_converting_all_of_a_grant_ends_it_and_the_revert_grants_them_again(
    admin, lead, a100_grant, today
):
    layout = ask(lead, a100_grant, today, gpus=4, kind="shared", mig_profile="", replicas=2)
    layout = applied(layout, admin)
    a100_grant.refresh_from_db()
    assert a100_grant.state == QuotaGrant.State.REVOKED
    assert layout.slice_grant.gpu_model == f"{A100}-SHARED"
    assert layout.slice_grant.gpus == 8

    grants.give_back(layout, today=today + datetime.timedelta(days=8))
    layout.save()

    layout.slice_grant.refresh_from_db()
    assert layout.slice_grant.state == QuotaGrant.State.EXPIRED
    returned = layout.returned_grant
    assert (returned.gpu_resource, returned.gpu_model, returned.gpus) == ("nvidia.com/gpu", A100, 4)
    assert returned.ends_on == a100_grant.ends_on


def test_a_source_an_admin_revoked_meanwhile_gets_nothing_back(admin, pending_layout, a100_grant):
    layout = applied(pending_layout, admin)
    quota.quota_grant_revoke(actor=admin, grant=a100_grant, note="Team leaves.")

    grants.give_back(layout)

    assert layout.returned_grant is None
    layout.slice_grant.refresh_from_db()
    assert layout.slice_grant.state == QuotaGrant.State.EXPIRED


def test_a_source_whose_period_is_over_gets_nothing_back(admin, pending_layout, a100_grant):
    layout = applied(pending_layout, admin)

    grants.give_back(layout, today=a100_grant.ends_on + datetime.timedelta(days=1))

    assert layout.returned_grant is None


def test_a_source_shrunk_below_the_layout_meanwhile_is_not_converted(
    admin, pending_layout, a100_grant
):
    quota.quota_grant_shrink(actor=admin, grant=a100_grant, gpus=1)
    pending_layout.state = State.APPLYING
    pending_layout.save()

    refused = grants.convert(pending_layout)

    assert "no longer holds 2 GPUs" in refused
    assert pending_layout.slice_grant is None
    a100_grant.refresh_from_db()
    assert a100_grant.gpus == 1
