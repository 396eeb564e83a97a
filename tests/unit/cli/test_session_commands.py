"""``gpuportal sessions`` before it reaches a portal: its usage errors, the body ``start`` sends,
and how a session is shown. Against the portal itself: tests/integration/cli/."""

import io

import pytest

from gpuportal import cli, config, exits, output


@pytest.fixture(autouse=True)
def no_login(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv(config.URL_VARIABLE, raising=False)
    monkeypatch.delenv(config.TOKEN_VARIABLE, raising=False)


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


class FakeApi:
    """Records what a command posts, and answers with ``answer``."""

    base_url = "https://portal.example"

    def __init__(self, answer: dict):
        self.answer = answer
        self.posted: list[tuple[str, dict | None]] = []

    def post(self, path, body=None):
        self.posted.append((path, body))
        return self.answer

    def close(self):
        pass


def run_with(api: FakeApi, *argv):
    out, err = io.StringIO(), io.StringIO()
    args = cli.build_parser().parse_args(list(argv))
    ctx = cli.Context(args, out, err)
    ctx._client = api
    return args.run(ctx), out.getvalue()


@pytest.mark.parametrize("command", ["show", "stop", "resume"])
def test_a_session_id_must_be_a_positive_number(command):
    code, _, err = run("sessions", command, "abc")

    assert code == exits.BAD_INPUT
    assert "not a session id: 'abc'" in err


def test_gpus_may_be_zero_but_not_negative():
    base = ["sessions", "start", "--team", "t", "--cluster", "c", "--name", "n"]

    zero = cli.build_parser().parse_args([*base, "--gpus", "0"])
    code, _, err = run(*base, "--gpus", "-1")

    assert zero.gpus == 0
    assert code == exits.BAD_INPUT
    assert "must be 0 or more" in err


def test_start_needs_team_cluster_and_name():
    code, _, err = run("sessions", "start", "--team", "vision")

    assert code == exits.BAD_INPUT
    assert "--cluster" in err


def test_start_sends_only_the_options_given():
    api = FakeApi({"id": 7, "url": "/sessions/7/", "state": "queued"})

    code, _ = run_with(
        api,
        "sessions",
        "start",
        "--team",
        "vision",
        "--cluster",
        "gpu-east",
        "--name",
        "lab",
        "--gpus",
        "1",
        "--memory-gib",
        "8",
        "--home-gib",
        "20",
    )

    assert code == exits.OK
    assert api.posted == [
        (
            "sessions/",
            {
                "team": "vision",
                "cluster": "gpu-east",
                "name": "lab",
                "gpus": 1,
                "memory_gib": "8",
                "home_gib": 20,
            },
        )
    ]


def test_a_session_table_shows_where_to_open_it_and_json_the_apis_object():
    answer = {"id": 7, "url": "/sessions/7/", "state": "running", "idle": None}

    _, table = run_with(FakeApi(answer), "sessions", "stop", "7")
    _, as_json = run_with(FakeApi(answer), "sessions", "stop", "7", "-o", "json")

    assert "https://portal.example/sessions/7/" in table
    assert output.as_json(answer) == as_json


def test_stop_and_resume_post_to_the_sessions_actions():
    api = FakeApi({"id": 7})

    run_with(api, "sessions", "stop", "7")
    run_with(api, "sessions", "resume", "7")

    assert api.posted == [("sessions/7/stop/", None), ("sessions/7/resume/", None)]
