"""What the client decides before it reaches a portal: usage errors, the job file, error
messages, exit codes. Against the portal itself: tests/integration/cli."""

import io

import pytest

from gpuportal import cli, client, config, exits, follow
from workloads.log_follows import STOPPED


@pytest.fixture(autouse=True)
def no_login(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv(config.URL_VARIABLE, raising=False)
    monkeypatch.delenv(config.TOKEN_VARIABLE, raising=False)


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_usage_errors_exit_1_not_argparses_2():
    code, _, err = run("jobs", "stop", "not-a-number")

    assert code == exits.BAD_INPUT
    assert "not a job id" in err


def test_unknown_command_exits_1():
    assert run("frobnicate")[0] == exits.BAD_INPUT


def test_help_exits_0(capsys):
    assert run("jobs", "--help")[0] == exits.OK


def test_without_a_portal_to_talk_to_it_says_how_to_log_in():
    code, _, err = run("teams")

    assert code == exits.BAD_INPUT
    assert "gpuportal login --url" in err


def test_without_a_token_it_is_an_authentication_failure(monkeypatch):
    monkeypatch.setenv(config.URL_VARIABLE, "http://127.0.0.1:9")

    code, _, err = run("jobs", "list")

    assert code == exits.AUTH
    assert "not logged in" in err


def test_options_may_follow_the_command(monkeypatch):
    args = cli.build_parser().parse_args(["jobs", "list", "-o", "json", "--url", "x.example"])
    top = cli.build_parser().parse_args(["-o", "json", "jobs", "list"])

    assert (args.output, args.url) == ("json", "x.example")
    assert (top.output, top.url) == ("json", None)


def test_job_file_env_may_be_a_mapping(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("name: train\nimage: r.example/t:1\ngpus: 2\nenv:\n  EPOCHS: 3\n  EMPTY:\n")

    spec = cli.read_job_file(str(path), io.StringIO())

    assert spec == {
        "name": "train",
        "image": "r.example/t:1",
        "gpus": 2,
        "env": [{"name": "EPOCHS", "value": "3"}, {"name": "EMPTY", "value": ""}],
    }


def test_job_file_from_stdin():
    assert cli.read_job_file("-", io.StringIO("{name: a, gpus: 1}")) == {"name": "a", "gpus": 1}


@pytest.mark.parametrize(
    ("text", "message"),
    [("- a\n- b\n", "must hold a mapping"), ("name: [unclosed\n", "not valid YAML")],
)
def test_a_job_file_that_is_no_mapping_is_bad_input(tmp_path, text, message):
    path = tmp_path / "job.yaml"
    path.write_text(text)

    code, _, err = run("jobs", "submit", "-f", str(path))

    assert code == exits.BAD_INPUT
    assert message in err


def test_a_missing_job_file_is_bad_input(tmp_path):
    code, _, err = run("jobs", "submit", "-f", str(tmp_path / "nope.yaml"))

    assert code == exits.BAD_INPUT
    assert "cannot read" in err


def test_api_errors_are_named_by_field():
    body = {
        "gpus": ["Ensure this value is greater than or equal to 1."],
        "env": [{}, {"name": ["This field is required."]}],
        "non_field_errors": ["Something else."],
    }

    assert client.describe_errors(body) == [
        "gpus: Ensure this value is greater than or equal to 1.",
        "env: [1] name: This field is required.",
        "Something else.",
    ]
    assert client.describe_errors({"detail": "Not found."}) == ["Not found."]
    assert client.describe_errors({"detail": "No.", "state": ["succeeded"]}) == ["No."]


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (400, exits.BAD_INPUT),
        (401, exits.AUTH),
        (403, exits.AUTH),
        (404, exits.NOT_FOUND),
        (409, exits.CONFLICT),
        (429, exits.SERVER),
        (500, exits.SERVER),
        (503, exits.SERVER),
    ],
)
def test_http_statuses_map_to_the_documented_exit_codes(status, code):
    assert client.exit_code_for(status) == code


def test_follow_knows_the_portals_stopped_line():
    assert follow.STOPPED == STOPPED
