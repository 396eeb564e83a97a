"""``gpuportal sessions`` against the live test server: start, show, list, stop and resume, and
the exit codes of a refusal (400 naming the field, 403, 404, 409). No cluster: the start's task is
recorded rather than sent (the worker's side is tests/integration/interactive)."""

import pytest

from gpuportal import exits
from interactive import enqueue
from interactive.models import HomeVolume, InteractiveSession, SessionPolicy

pytestmark = pytest.mark.django_db(transaction=True)

State = InteractiveSession.State


@pytest.fixture(autouse=True)
def enqueued(monkeypatch):
    """The sessions whose start the portal asked for (nothing reaches a broker)."""
    started: list[int] = []
    monkeypatch.setattr(
        enqueue, "enqueue_start", lambda *, session_id: started.append(session_id) or True
    )
    monkeypatch.setattr(enqueue, "enqueue_delete", lambda **kwargs: True)
    return started


def start(cli, *options):
    return cli(
        "sessions",
        "start",
        "--team",
        "vision",
        "--cluster",
        "gpu-east",
        "--name",
        "lab",
        *options,
    )


def test_start_then_show_list_stop_and_resume(cli, member, cluster, enqueued):
    cli.login(member)

    started = start(
        cli,
        "--cpu-cores",
        "2",
        "--memory-gib",
        "4",
        "--max-lifetime-hours",
        "3",
        "--home-gib",
        "5",
        "-o",
        "json",
    )
    assert started.code == exits.OK, started.err
    session_id = started.json()["id"]
    shown = cli("sessions", "show", session_id)
    listed = cli("sessions", "list")
    stopped = cli("sessions", "stop", session_id)
    again = cli("sessions", "stop", session_id)
    resumed = cli("sessions", "resume", session_id, "-o", "json")

    session = InteractiveSession.objects.get(pk=session_id)
    assert (session.owner, session.name, session.cpu_cores, session.memory_gib) == (
        member,
        "lab",
        2,
        4,
    )
    assert session.max_lifetime_seconds == 3 * 3600
    assert HomeVolume.objects.get(owner=member).size_gib == 5
    assert started.json()["url"] == f"/sessions/{session_id}/"
    assert shown.code == exits.OK, shown.err
    assert f"open:               {cli.url}/sessions/{session_id}/" in shown.out
    assert "home gib:           5" in shown.out
    assert listed.out.splitlines()[0].split() == [
        "ID",
        "NAME",
        "TEAM",
        "CLUSTER",
        "OWNER",
        "STATE",
        "GPUS",
        "STARTED",
    ]
    assert listed.out.splitlines()[1].split() == [
        str(session_id),
        "lab",
        "vision",
        "gpu-east",
        "mo-member",
        "queued",
        "0",
        "-",
    ]
    assert stopped.code == exits.OK, stopped.err
    assert "state:              stopped" in stopped.out
    assert again.code == exits.CONFLICT
    assert again.err == f"gpuportal: Cannot stop session #{session_id}: it is already stopped.\n"
    assert resumed.code == exits.OK, resumed.err
    assert (resumed.json()["state"], resumed.json()["run"]) == ("queued", 2)
    assert enqueued == [session_id, session_id]


def test_defaults_make_a_cpu_session_of_the_portals_image(cli, member, cluster, settings):
    cli.login(member)

    started = start(cli, "-o", "json")

    assert started.code == exits.OK, started.err
    made = started.json()
    assert (made["image"], made["gpus"], made["home_gib"]) == (
        settings.SESSIONS_DEFAULT_IMAGE,
        0,
        settings.SESSIONS_DEFAULT_HOME_GIB,
    )


def test_a_lifetime_over_the_teams_maximum_exits_1_naming_the_field(cli, member, team, cluster):
    SessionPolicy.objects.create(team=team, max_lifetime_hours=4, idle_minutes=30, warn_minutes=5)
    cli.login(member)

    result = start(cli, "--max-lifetime-hours", "6")

    assert result.code == exits.BAD_INPUT
    assert result.err.startswith("gpuportal: max_lifetime_hours: Team vision's sessions may run")
    assert not InteractiveSession.objects.exists()


def test_every_refused_field_is_named(cli, member, cluster):
    cluster.allowed_registries = ["nvcr.io"]
    cluster.allow_all_registries = False
    cluster.object_limits = {"requests.storage": "20Gi"}
    cluster.save()
    cli.login(member)

    result = start(cli, "--image", "docker.io/jupyter/base-notebook:1", "--home-gib", "50")

    assert result.code == exits.BAD_INPUT
    fields = sorted(line.split(":")[1].strip() for line in result.err.splitlines())
    assert fields == ["home_gib", "image"]


def test_a_viewer_may_not_start_a_session_exit_2(cli, viewer, cluster):
    cli.login(viewer)

    result = start(cli)

    assert result.code == exits.AUTH
    assert "Only leads and members of vision can start sessions there." in result.err


def test_unknown_session_exits_3(cli, member):
    cli.login(member)

    for command in ("show", "stop", "resume"):
        assert cli("sessions", command, "999999").code == exits.NOT_FOUND


def test_only_the_owner_resumes_exit_2_and_a_lead_stops(cli, member, lead, cluster):
    cli.login(member)
    session_id = start(cli, "-o", "json").json()["id"]
    cli.login(lead)

    stopped = cli("sessions", "stop", session_id, "-o", "json")
    resumed = cli("sessions", "resume", session_id)

    assert stopped.code == exits.OK, stopped.err
    assert stopped.json()["stop_reason"] == "admin"
    assert resumed.code == exits.AUTH
    assert f"Only the owner of session #{session_id} can resume it." in resumed.err
