"""``gpuportal`` against the live test server: sign-in, teams, quota requests, and the exit
codes scripts rely on. Jobs on the devcluster: test_cli_jobs.py."""

import datetime
import stat

import pytest

from accounts.models import ApiToken
from gpuportal import config, exits
from tenants.models import QuotaRequest
from tests.integration.conftest import free_port

pytestmark = pytest.mark.django_db(transaction=True)


def test_login_stores_a_token_that_teams_then_uses(cli, config_home, lead, other_lead):
    logged_in = cli.login(lead)
    teams = cli("teams")
    as_json = cli("teams", "-o", "json")

    assert logged_in.code == exits.OK, logged_in.err
    path = config_home / "gpuportal" / "config.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    token = ApiToken.objects.get(user=lead)
    assert token.name.startswith("gpuportal CLI on ")
    assert teams.code == exits.OK, teams.err
    assert teams.out.splitlines()[0].split() == ["SLUG", "NAME", "ROLE", "ARCHIVED"]
    assert teams.out.splitlines()[1].split() == ["vision", "Vision", "lead", "-"]
    assert [(t["slug"], t["my_role"]) for t in as_json.json()] == [("vision", "lead")]


def test_wrong_password_exits_2_and_stores_nothing(cli, config_home, lead):
    result = cli.login(lead, password="not-the-password")

    assert result.code == exits.AUTH
    assert "Unable to sign in with these credentials." in result.err
    assert not (config_home / "gpuportal" / "config.json").exists()
    assert not ApiToken.objects.filter(user=lead).exists()


def test_quota_request_then_quota_list(cli, lead, cluster):
    cli.login(lead)
    ends_on = datetime.date.today() + datetime.timedelta(days=30)

    made = cli(
        "quota",
        "request",
        "--team",
        "vision",
        "--cluster",
        "gpu-east",
        "--gpus",
        "2",
        "--ends-on",
        ends_on.isoformat(),
        "-j",
        "Fine-tuning the detector.",
        "-o",
        "json",
    )
    listed = cli("quota", "list", "--team", "vision", "-o", "json")
    table = cli("quota", "list", "--state", "pending")

    assert made.code == exits.OK, made.err
    request = QuotaRequest.objects.get(pk=made.json()["id"])
    assert (request.team.slug, request.gpus, request.requested_by) == ("vision", 2, lead)
    assert request.state == QuotaRequest.State.PENDING
    assert [r["id"] for r in listed.json()] == [request.pk]
    row = table.out.splitlines()[1].split()
    assert row[:4] == [str(request.pk), "vision", "gpu-east", "2"]
    assert row[-2:] == ["pending", "lena-lead"]


def test_bad_input_exits_1_naming_the_field(cli, lead, cluster):
    cli.login(lead)

    result = cli(
        "quota",
        "request",
        "--team",
        "vision",
        "--cluster",
        "no-such-cluster",
        "--gpus",
        "2",
        "-j",
        "x",
    )

    assert result.code == exits.BAD_INPUT
    assert result.err.startswith("gpuportal: cluster: ")
    assert not QuotaRequest.objects.exists()


def test_viewer_may_not_submit_jobs_exit_2(cli, viewer, cluster, tmp_path):
    cli.login(viewer)
    job = tmp_path / "job.yaml"
    job.write_text(
        "team: vision\ncluster: gpu-east\nname: t\nimage: registry.example.com/t:1\ngpus: 1\n"
    )

    result = cli("jobs", "submit", "-f", job)

    assert result.code == exits.AUTH
    assert result.err.startswith("gpuportal: ")


def test_unknown_job_exits_3(cli, member):
    cli.login(member)

    assert cli("jobs", "show", "999999").code == exits.NOT_FOUND
    assert cli("jobs", "stop", "999999").code == exits.NOT_FOUND
    logs = cli("jobs", "logs", "999999")
    assert logs.code == exits.NOT_FOUND
    assert "No GpuJob matches the given query." in logs.err


def test_logout_revokes_the_token(cli, lead, monkeypatch):
    cli.login(lead)
    secret = config.read_file()["token"]

    logged_out = cli("logout")
    after = cli("teams")
    monkeypatch.setenv(config.URL_VARIABLE, cli.url)
    monkeypatch.setenv(config.TOKEN_VARIABLE, secret)
    with_old_token = cli("teams")

    assert logged_out.code == exits.OK
    assert not ApiToken.objects.filter(user=lead).exists()
    assert after.code == exits.BAD_INPUT  # no portal configured any more
    assert with_old_token.code == exits.AUTH  # the portal's 401
    assert "Invalid token." in with_old_token.err


def test_server_down_exits_4(cli, monkeypatch):
    down = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv(config.TOKEN_VARIABLE, "gpup_whatever")

    result = cli("--url", down, "jobs", "list")

    assert result.code == exits.SERVER
    assert f"cannot reach the portal at {down}" in result.err
