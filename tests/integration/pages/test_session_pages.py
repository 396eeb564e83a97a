"""The session pages without a cluster: the list (only the user's teams'), the start form and its
errors beside their fields, the page of a session with its idle explanation and warning, its
Stop and Resume buttons and who may press them, and a team's session policy for its leads.

Sessions are started through ``services.session_start`` (the rules the portal applies); the
start's task is enqueued on commit, which these tests' transactions never reach (as for jobs)."""

import datetime

import pytest
from django.urls import reverse
from django.utils import dateformat, timezone

from interactive import culling_view, enqueue, services
from interactive.models import HomeVolume, InteractiveSession, SessionPolicy
from interactive.specs import SessionRequest
from tenants.models import AuditEvent, Membership
from tests import factories
from tests.integration.pages.helpers import field_error_html, get_ok, messages_text

pytestmark = pytest.mark.django_db

State = InteractiveSession.State
NEW = "/interactive/new/"


def start(owner, team, cluster, **fields) -> InteractiveSession:
    """A session started through the service, then put in ``state`` and the other columns
    given (as the worker, the watcher and the culling check would write them)."""
    request, errors = SessionRequest.read({"name": fields.pop("name", "notebook")})
    assert not errors
    session = services.session_start(user=owner, team=team, cluster=cluster, request=request)
    if fields:
        InteractiveSession.objects.filter(pk=session.pk).update(**fields)
    return InteractiveSession.objects.get(pk=session.pk)


def running(owner, team, cluster, **fields) -> InteractiveSession:
    now = timezone.now()
    fields = {
        "state": State.RUNNING,
        "started_at": now - datetime.timedelta(minutes=70),
        "node": "cpu-node-1",
        "server_address": "10.0.0.7:8888",
        "message": "The server answers.",
        **fields,
    }
    return start(owner, team, cluster, **fields)


def shown_time(moment: datetime.datetime) -> str:
    """A time as the page shows it ("H:i T", in the portal's time zone)."""
    return dateformat.format(timezone.localtime(moment), "H:i T")


@pytest.fixture
def teammate(team):
    """Another member of team vision (neither lead nor owner of the member's sessions)."""
    user = factories.UserFactory(username="tia-teammate")
    factories.MembershipFactory(team=team, user=user, role=Membership.Role.MEMBER)
    return user


def form(team, cluster, **fields) -> dict:
    return {"team": team.pk, "cluster": cluster.pk, "name": "eda", **fields}


# --- list --------------------------------------------------------------------------------------


def test_list_shows_only_the_sessions_of_the_users_teams(
    client_as, member, team, other_lead, other_team, cluster
):
    ours = start(member, team, cluster, name="ours")
    theirs = start(other_lead, other_team, cluster, name="theirs")

    html = get_ok(client_as(member), "/interactive/").content.decode()

    assert f'data-testid="session-row-{ours.pk}"' in html
    assert f"/interactive/{ours.pk}/" in html
    assert f'data-testid="session-row-{theirs.pk}"' not in html
    assert "theirs" not in html


def test_list_offers_open_to_the_owner_of_a_running_session_only(
    client_as, member, lead, team, cluster
):
    session = running(member, team, cluster)
    queued = start(member, team, cluster, name="later")

    owners = get_ok(client_as(member), "/interactive/").content.decode()
    leads = get_ok(client_as(lead), "/interactive/").content.decode()

    assert f'data-testid="open-session-{session.pk}"' in owners
    assert f'href="/sessions/{session.pk}/"' in owners
    assert f'data-testid="open-session-{queued.pk}"' not in owners
    assert f'data-testid="session-row-{session.pk}"' in leads
    assert "/sessions/" not in leads


def test_list_shows_the_row_facts_and_the_start_button(client_as, member, team, cluster):
    session = running(member, team, cluster, name="explore")

    html = get_ok(client_as(member), "/interactive/").content.decode()

    row = html.split(f'data-testid="session-row-{session.pk}"')[1].split("</tr>")[0]
    assert f"#{session.pk} explore" in row
    assert "mo-member" in row
    assert "<td>vision</td>" in row
    assert "<td>gpu-east</td>" in row
    assert f'data-testid="session-state-{session.pk}">Running<' in row
    assert 'href="/interactive/new/"' in html


def test_viewer_sees_the_list_without_the_start_button(client_as, viewer, member, team, cluster):
    session = start(member, team, cluster)

    html = get_ok(client_as(viewer), "/interactive/").content.decode()

    assert f'data-testid="session-row-{session.pk}"' in html
    assert 'data-testid="start-session"' not in html


def test_list_links_the_session_policy_for_the_teams_leads_only(client_as, lead, member):
    leads = get_ok(client_as(lead), "/interactive/").content.decode()
    members = get_ok(client_as(member), "/interactive/").content.decode()

    assert 'href="/interactive/policy/vision/"' in leads
    assert "/interactive/policy/" not in members


def test_list_filters_by_state(client_as, member, team, cluster):
    up = running(member, team, cluster, name="up")
    down = start(member, team, cluster, name="down", state=State.STOPPED)

    html = get_ok(client_as(member), "/interactive/?state=stopped").content.decode()

    assert f'data-testid="session-row-{down.pk}"' in html
    assert f'data-testid="session-row-{up.pk}"' not in html


def test_nav_links_to_sessions_and_marks_it_current(client_as, member):
    html = get_ok(client_as(member), "/interactive/").content.decode()

    assert '<a href="/interactive/" aria-current="page">Sessions</a>' in html


# --- start -------------------------------------------------------------------------------------


def test_member_starts_a_session_through_the_form_and_lands_on_its_page(
    client_as, member, team, cluster, monkeypatch, django_capture_on_commit_callbacks
):
    enqueued = []
    monkeypatch.setattr(enqueue, "enqueue_start", lambda **kwargs: enqueued.append(kwargs))

    with django_capture_on_commit_callbacks(execute=True):
        response = client_as(member).post(
            NEW,
            form(team, cluster, gpus="0", cpu_cores="2", memory_gib="4", max_lifetime_hours="3"),
        )

    session = InteractiveSession.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/interactive/{session.pk}/"
    assert (session.owner, session.team, session.cluster, session.name) == (
        member,
        team,
        cluster,
        "eda",
    )
    assert session.image == "localhost/gpu-portal-notebook:dev"  # blank: the default image
    assert (session.gpus, session.cpu_cores, session.memory_gib) == (0, 2, 4)
    assert session.max_lifetime_seconds == 3 * 3600
    assert session.state == State.QUEUED
    assert HomeVolume.objects.get(owner=member, team=team, cluster=cluster).size_gib == 10
    assert enqueued == [{"session_id": session.pk}]


def test_the_form_says_the_default_image_and_the_teams_maximum_lifetime(
    client_as, member, team, settings
):
    settings.SESSIONS_DEFAULT_IMAGE = "registry.example.com/lab/notebook:7"
    SessionPolicy.objects.create(team=team, max_lifetime_hours=6, idle_minutes=30, warn_minutes=5)

    html = get_ok(client_as(member), NEW).content.decode()

    assert 'placeholder="registry.example.com/lab/notebook:7"' in html
    assert "the portal&#x27;s JupyterLab image, registry.example.com/lab/notebook:7" in html
    assert "At most your team&#x27;s maximum: Vision 6 h." in html


def test_the_form_shows_the_size_of_the_members_home_volume(client_as, member, team, cluster):
    HomeVolume.objects.create(team=team, cluster=cluster, owner=member, size_gib=25)

    html = get_ok(client_as(member), NEW).content.decode()

    assert "You have: 25 GiB in Vision on gpu-east" in html


def test_an_image_from_a_registry_the_cluster_refuses_is_shown_beside_image(
    client_as, member, team, cluster
):
    cluster.allowed_registries = ["nvcr.io"]
    cluster.allow_all_registries = False
    cluster.save()

    response = client_as(member).post(
        NEW, form(team, cluster, image="docker.io/jupyter/base-notebook:latest")
    )

    assert response.status_code == 200
    assert "which cluster gpu-east does not allow" in field_error_html(response, "id_image")
    assert not InteractiveSession.objects.exists()


def test_the_default_image_refused_by_the_registries_is_shown_beside_image(
    client_as, member, team, cluster
):
    cluster.allowed_registries = ["nvcr.io"]
    cluster.allow_all_registries = False
    cluster.save()

    response = client_as(member).post(NEW, form(team, cluster))

    assert response.status_code == 200
    assert "does not allow" in field_error_html(response, "id_image")


def test_a_lifetime_over_the_teams_maximum_is_shown_beside_the_lifetime(
    client_as, member, team, cluster
):
    SessionPolicy.objects.create(team=team, max_lifetime_hours=4, idle_minutes=30, warn_minutes=5)

    response = client_as(member).post(NEW, form(team, cluster, max_lifetime_hours="6"))

    assert response.status_code == 200
    error = field_error_html(response, "id_max_lifetime_hours")
    assert "may run at most 4 hours at a time; 6 were asked for" in error
    assert not InteractiveSession.objects.exists()


def test_a_home_volume_over_the_storage_quota_is_shown_beside_home_gib(
    client_as, member, team, cluster
):
    cluster.object_limits = {"requests.storage": "20Gi"}
    cluster.save()

    response = client_as(member).post(NEW, form(team, cluster, home_gib="50"))

    assert response.status_code == 200
    error = field_error_html(response, "id_home_gib")
    assert "A 50 GiB home volume does not fit team vision&#x27;s storage quota" in error
    assert "20 GiB are left" in error
    assert not HomeVolume.objects.exists()


def test_a_bad_shape_and_a_refusal_are_shown_together_each_beside_its_field(
    client_as, member, team, cluster
):
    SessionPolicy.objects.create(team=team, max_lifetime_hours=4, idle_minutes=30, warn_minutes=5)

    response = client_as(member).post(
        NEW, form(team, cluster, image="Not An Image!", max_lifetime_hours="6", cpu_cores="0")
    )

    assert response.status_code == 200
    assert "is not a container image reference" in field_error_html(response, "id_image")
    assert "at most 4 hours" in field_error_html(response, "id_max_lifetime_hours")
    assert "must be above 0" in field_error_html(response, "id_cpu_cores")


def test_gpus_beyond_the_teams_quota_are_shown_beside_gpus(client_as, member, team, cluster):
    response = client_as(member).post(NEW, form(team, cluster, gpus="2"))

    assert response.status_code == 200
    assert "this session asks for 2" in field_error_html(response, "id_gpus")
    assert not InteractiveSession.objects.exists()


def test_choosing_a_cluster_offers_its_gpu_models(client_as, member, team, second_cluster):
    factories.GpuCapacityFactory(
        cluster=second_cluster, gpu_model="NVIDIA-H100-80GB-HBM3", allocatable=8
    )

    html = (
        client_as(member)
        .get(f"{NEW}?cluster={second_cluster.pk}", HTTP_HX_REQUEST="true")
        .content.decode()
    )

    # The model select replaces the form's; the kind select its own.
    assert '<div class="field" id="field-gpu_model">' in html
    assert '<option value="NVIDIA-H100-80GB-HBM3">' in html
    assert 'id="field-gpu_resource" hx-swap-oob="true"' in html


def test_a_gpu_session_within_the_teams_quota_is_started(
    client_as, member, team, cluster, make_grant, lead
):
    make_grant(lead, team, gpus=2)

    response = client_as(member).post(NEW, form(team, cluster, gpus="1"))

    session = InteractiveSession.objects.get()
    assert response.status_code == 302
    assert (session.gpus, session.gpu_resource) == (1, "nvidia.com/gpu")


def test_viewer_cannot_start_a_session(client_as, viewer, team, cluster):
    page = client_as(viewer)

    assert page.get(NEW).status_code == 403
    assert page.post(NEW, form(team, cluster)).status_code == 403
    assert not InteractiveSession.objects.exists()


def test_a_member_cannot_start_one_in_a_team_where_they_only_view(
    client_as, member, other_team, cluster
):
    factories.MembershipFactory(team=other_team, user=member, role=Membership.Role.VIEWER)

    response = client_as(member).post(NEW, form(other_team, cluster))

    assert response.status_code == 200
    assert "Select a valid choice" in field_error_html(response, "id_team")
    assert not InteractiveSession.objects.exists()


# --- one session -------------------------------------------------------------------------------


def test_detail_shows_the_session_what_it_runs_and_when_its_lifetime_ends(
    client_as, member, team, cluster
):
    session = running(member, team, cluster, max_lifetime_seconds=5 * 3600)

    html = get_ok(client_as(member), f"/interactive/{session.pk}/").content.decode()

    ends = timezone.localtime(session.started_at + datetime.timedelta(hours=5))
    assert f'data-testid="session-ends">{ends:%Y-%m-%d %H:%M:%S}' in html
    assert 'data-testid="session-node">cpu-node-1<' in html
    assert 'data-testid="session-run">1<' in html
    assert "<code>localhost/gpu-portal-notebook:dev</code>" in html
    assert "5 hours a run" in html
    assert f"10 GiB, claim <code>home-{member.pk}</code>" in html
    assert 'data-testid="open-session"' in html
    assert f'href="/sessions/{session.pk}/"' in html
    assert f'hx-get="/interactive/{session.pk}/live/"' in html


def test_detail_explains_why_an_idle_session_will_be_stopped_and_when(
    client_as, member, team, cluster
):
    since = timezone.now() - datetime.timedelta(minutes=20)
    session = running(member, team, cluster, idle_since=since)
    stop_at = since + datetime.timedelta(minutes=60)  # the portal's default policy

    html = get_ok(client_as(member), f"/interactive/{session.pk}/").content.decode()

    idle = html.split('data-testid="session-idle"')[1].split("</p>")[0]
    assert f"Idle since {shown_time(since)}" in idle
    assert f"will be stopped at <strong>{shown_time(stop_at)}</strong> because it is idle" in idle
    assert "the team stops sessions idle 60 minutes" in idle
    assert 'data-testid="session-idle-warning"' not in html


def test_detail_shows_the_warning_banner_once_the_owner_was_warned(
    client_as, member, lead, team, cluster
):
    since = timezone.now() - datetime.timedelta(minutes=58)
    warned = timezone.now() - datetime.timedelta(minutes=1)
    session = running(member, team, cluster, idle_since=since, warned_at=warned)
    stop_at = culling_view.stop_time(since, warned, SessionPolicy(idle_minutes=60, warn_minutes=15))

    for user in (member, lead):
        html = get_ok(client_as(user), f"/interactive/{session.pk}/").content.decode()
        banner = html.split('data-testid="session-idle-warning"')[1].split("</p>")[0]
        assert f"it will be stopped at <strong>{shown_time(stop_at)}</strong>" in banner
        assert f"warned at {shown_time(warned)}" in banner


def test_detail_of_a_session_in_use_says_so_and_shows_no_warning(client_as, member, team, cluster):
    session = running(member, team, cluster, idle_checked_at=timezone.now())

    html = get_ok(client_as(member), f"/interactive/{session.pk}/").content.decode()

    assert "In use (last checked" in html
    assert 'data-testid="session-idle-warning"' not in html


def test_the_live_part_alone_is_polled_uncached_while_active_and_not_once_stopped(
    client_as, member, team, cluster
):
    session = running(member, team, cluster, idle_since=timezone.now(), warned_at=timezone.now())
    stopped = start(member, team, cluster, name="done", state=State.STOPPED)
    page = client_as(member)

    live = page.get(f"/interactive/{session.pk}/live/")
    done = page.get(f"/interactive/{stopped.pk}/live/").content.decode()

    html = live.content.decode()
    assert live.status_code == 200
    assert "no-cache" in live["Cache-Control"]
    assert html.startswith('<section id="session-live"')
    assert "<html" not in html
    assert 'hx-trigger="every 3s"' in html
    assert 'data-testid="session-idle-warning"' in html
    assert "hx-trigger" not in done


def test_only_the_owner_sees_open_and_resume_and_teammates_no_buttons(
    client_as, member, teammate, lead, team, cluster
):
    session = running(member, team, cluster)
    stopped = start(member, team, cluster, name="done", state=State.STOPPED)

    teammates = get_ok(client_as(teammate), f"/interactive/{session.pk}/").content.decode()
    leads = get_ok(client_as(lead), f"/interactive/{session.pk}/").content.decode()
    lead_stopped = get_ok(client_as(lead), f"/interactive/{stopped.pk}/").content.decode()
    owner_stopped = get_ok(client_as(member), f"/interactive/{stopped.pk}/").content.decode()

    assert 'data-testid="open-session"' not in teammates
    assert 'data-testid="stop-session"' not in teammates
    assert 'data-testid="open-session"' not in leads
    assert 'data-testid="stop-session"' in leads
    assert 'data-testid="resume-session"' not in lead_stopped
    assert 'data-testid="resume-session"' in owner_stopped
    assert 'data-testid="stop-session"' not in owner_stopped


def test_another_teams_session_is_not_found(client_as, other_lead, member, team, cluster):
    session = running(member, team, cluster)
    page = client_as(other_lead)

    assert page.get(f"/interactive/{session.pk}/").status_code == 404
    assert page.get(f"/interactive/{session.pk}/live/").status_code == 404
    assert page.post(f"/interactive/{session.pk}/stop/").status_code == 404
    assert page.post(f"/interactive/{session.pk}/resume/").status_code == 404
    assert InteractiveSession.objects.get(pk=session.pk).state == State.RUNNING


# --- stop and resume ---------------------------------------------------------------------------


def test_the_owner_stops_a_session_and_sees_it_stopped(client_as, member, team, cluster):
    session = running(member, team, cluster)

    response = client_as(member).post(f"/interactive/{session.pk}/stop/", follow=True)

    session.refresh_from_db()
    assert response.redirect_chain == [(f"/interactive/{session.pk}/", 302)]
    assert session.state == State.STOPPED
    assert session.stop_reason == InteractiveSession.StopReason.OWNER
    assert messages_text(response) == [
        f"Stopping session #{session.pk}: its server ends; the home volume is kept."
    ]
    assert 'data-testid="resume-session"' in response.content.decode()


def test_a_lead_stops_a_members_session(client_as, member, lead, team, cluster):
    session = running(member, team, cluster)

    response = client_as(lead).post(f"/interactive/{session.pk}/stop/")

    session.refresh_from_db()
    assert response.status_code == 302
    assert (session.state, session.stop_reason, session.stopped_by) == (
        State.STOPPED,
        InteractiveSession.StopReason.ADMIN,
        lead,
    )


@pytest.mark.parametrize("who", ["teammate", "viewer"])
def test_others_in_the_team_may_not_stop_a_session(request, client_as, member, team, cluster, who):
    session = running(member, team, cluster)

    response = client_as(request.getfixturevalue(who)).post(f"/interactive/{session.pk}/stop/")

    assert response.status_code == 403
    assert InteractiveSession.objects.get(pk=session.pk).state == State.RUNNING


def test_stopping_a_stopped_session_is_a_message_not_an_error(client_as, member, team, cluster):
    session = start(member, team, cluster, state=State.STOPPED)

    response = client_as(member).post(f"/interactive/{session.pk}/stop/", follow=True)

    assert response.status_code == 200
    assert messages_text(response) == [f"Cannot stop session #{session.pk}: it is already stopped."]


def test_the_owner_resumes_a_stopped_session_as_its_next_run(client_as, member, team, cluster):
    session = start(member, team, cluster, state=State.STOPPED)

    response = client_as(member).post(f"/interactive/{session.pk}/resume/", follow=True)

    session.refresh_from_db()
    assert response.redirect_chain == [(f"/interactive/{session.pk}/", 302)]
    assert (session.state, session.run) == (State.QUEUED, 2)
    assert messages_text(response) == [
        f"Resuming session #{session.pk}: a new run with the same home volume."
    ]


@pytest.mark.parametrize("who", ["lead", "teammate", "viewer"])
def test_nobody_but_the_owner_resumes_a_session(request, client_as, member, team, cluster, who):
    session = start(member, team, cluster, state=State.FAILED)

    response = client_as(request.getfixturevalue(who)).post(f"/interactive/{session.pk}/resume/")

    assert response.status_code == 403
    assert InteractiveSession.objects.get(pk=session.pk).run == 1


def test_resuming_a_running_session_is_a_message_not_an_error(client_as, member, team, cluster):
    session = running(member, team, cluster)

    response = client_as(member).post(f"/interactive/{session.pk}/resume/", follow=True)

    assert response.status_code == 200
    assert messages_text(response) == [f"Cannot resume session #{session.pk}: it is running."]


def test_a_resume_the_teams_rules_now_refuse_is_a_message(client_as, member, team, cluster):
    session = start(member, team, cluster, state=State.STOPPED, max_lifetime_seconds=8 * 3600)
    SessionPolicy.objects.create(team=team, max_lifetime_hours=4, idle_minutes=30, warn_minutes=5)

    response = client_as(member).post(f"/interactive/{session.pk}/resume/", follow=True)

    assert response.status_code == 200
    assert "may run at most 4 hours at a time" in " ".join(messages_text(response))
    assert InteractiveSession.objects.get(pk=session.pk).state == State.STOPPED


def test_stop_and_resume_take_only_posts(client_as, member, team, cluster):
    session = running(member, team, cluster)

    assert client_as(member).get(f"/interactive/{session.pk}/stop/").status_code == 405
    assert client_as(member).get(f"/interactive/{session.pk}/resume/").status_code == 405


# --- the team's policy -------------------------------------------------------------------------

POLICY = "/interactive/policy/vision/"


def test_the_policy_form_shows_the_portals_defaults_until_the_team_sets_one(client_as, lead):
    response = get_ok(client_as(lead), POLICY)

    form = response.context["form"]
    assert {name: form[name].value() for name in form.fields} == {
        "max_lifetime_hours": 24,
        "idle_minutes": 60,
        "warn_minutes": 15,
    }
    assert "these are the portal's defaults" in response.content.decode()


@pytest.mark.parametrize("who", ["lead", "admin"])
def test_a_lead_or_an_admin_sets_the_policy(request, client_as, team, who):
    user = request.getfixturevalue(who)

    body = {"max_lifetime_hours": "12", "idle_minutes": "45", "warn_minutes": "10"}

    response = client_as(user).post(POLICY, body, follow=True)

    policy = SessionPolicy.objects.get(team=team)
    assert response.redirect_chain == [(POLICY, 302)]
    assert messages_text(response) == ["Saved Vision's session policy."]
    assert (policy.max_lifetime_hours, policy.idle_minutes, policy.warn_minutes) == (12, 45, 10)
    assert policy.updated_by == user
    assert AuditEvent.objects.filter(action=AuditEvent.Action.SESSION_POLICY_SET).count() == 1


def test_a_warning_not_before_the_stop_is_shown_beside_warn_minutes(client_as, lead, team):
    response = client_as(lead).post(
        POLICY, {"max_lifetime_hours": "12", "idle_minutes": "10", "warn_minutes": "10"}
    )

    assert response.status_code == 200
    assert "The warning must come before the stop" in field_error_html(response, "id_warn_minutes")
    assert not SessionPolicy.objects.exists()


def test_a_lifetime_beyond_the_models_bound_is_shown_beside_it(client_as, lead, team):
    response = client_as(lead).post(
        POLICY, {"max_lifetime_hours": "1000", "idle_minutes": "60", "warn_minutes": "10"}
    )

    assert response.status_code == 200
    assert field_error_html(response, "id_max_lifetime_hours")
    assert not SessionPolicy.objects.exists()


def test_a_member_may_not_set_the_policy_and_another_team_does_not_see_it(
    client_as, member, other_lead
):
    body = {"max_lifetime_hours": "12", "idle_minutes": "45", "warn_minutes": "10"}

    assert client_as(member).get(POLICY).status_code == 403
    assert client_as(member).post(POLICY, body).status_code == 403
    assert client_as(other_lead).get(POLICY).status_code == 404
    assert not SessionPolicy.objects.exists()


def test_the_new_session_form_and_the_list_need_a_sign_in(client):
    for url in ("/interactive/", NEW, reverse("session-policy", args=["vision"])):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))
