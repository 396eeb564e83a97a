"""``gpuportal``: the portal's REST API from a shell.

Every command ends with one of the exit codes of ``gpuportal.exits``; errors go to stderr
(an API refusal as ``field: message`` lines), results to stdout as a table or, with
``--output json``, as the API's JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import os
import socket
import sys
from pathlib import Path
from typing import TextIO

import yaml

from gpuportal import __version__, completion, config, exits, follow, output, sessions
from gpuportal.arguments import DEFAULT_LIMIT, job_id, positive
from gpuportal.client import ApiError, Client, results

JOB_STATES = ("queued", "submitted", "pending", "running", "succeeded", "failed", "cancelled")
QUOTA_STATES = ("pending", "approved", "rejected", "cancelled")
CONTAINERS = ("main", "preprocess")

TEAM_COLUMNS = output.columns(
    ("slug", "slug"), ("name", "name"), ("role", "my_role"), ("archived", "archived_at")
)
QUOTA_COLUMNS = output.columns(
    ("id", "id"),
    ("team", "team"),
    ("cluster", "cluster"),
    ("gpus", "gpus"),
    ("gpu model", "gpu_model"),
    ("starts", "starts_on"),
    ("ends", "ends_on"),
    ("state", "state"),
    ("requested by", "requested_by"),
)
QUOTA_RECORD = [
    *QUOTA_COLUMNS,
    *output.columns(("justification", "justification"), ("decision note", "decision_note")),
]
JOB_COLUMNS = output.columns(
    ("id", "id"),
    ("name", "name"),
    ("team", "team"),
    ("cluster", "cluster"),
    ("state", "state"),
    ("gpus", "gpus"),
    ("node", "node"),
    ("created", "created_at"),
)
JOB_RECORD = output.columns(
    ("id", "id"),
    ("name", "name"),
    ("team", "team"),
    ("cluster", "cluster"),
    ("state", "state"),
    ("reason", "reason"),
    ("message", "message"),
    ("image", "image"),
    ("gpus", "gpus"),
    ("gpu model", "gpu_model"),
    ("priority", "priority"),
    ("node", "node"),
    ("exit code", "exit_code"),
    ("pods", "pods"),
    ("created", "created_at"),
    ("started", "started_at"),
    ("finished", "finished_at"),
    ("waiting because", "queue_status.why"),
)


class UsageError(Exception):
    """Bad options or input that never reached the portal (exit 1)."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error exits 1 (argparse's 2 is our "not signed in")."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(exits.BAD_INPUT, f"{self.prog}: error: {message}\n")


# --- the commands ------------------------------------------------------------------------------


class Context:
    """What a command works with: its options, where it writes, and the API when it needs it."""

    def __init__(self, args: argparse.Namespace, stdout: TextIO, stderr: TextIO):
        self.args = args
        self.stdout = stdout
        self.stderr = stderr
        self._client: Client | None = None

    @property
    def fmt(self) -> str:
        return getattr(self.args, "output", "table")

    def settings(self) -> config.Settings:
        try:
            return config.load(getattr(self.args, "url", None))
        except config.ConfigError as error:
            raise UsageError(str(error)) from None

    def api(self) -> Client:
        if self._client is None:
            settings = self.settings()
            if not settings.url:
                raise UsageError(
                    "no portal to talk to: run `gpuportal login --url URL`, or set "
                    f"{config.URL_VARIABLE}"
                )
            if not settings.token:
                raise ApiError(
                    f"not logged in to {settings.url}: run `gpuportal login`, or set "
                    f"{config.TOKEN_VARIABLE}",
                    exit_code=exits.AUTH,
                )
            self._client = Client(settings.url, settings.token)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def show(self, data, cols) -> None:
        self.stdout.write(output.render(data, fmt=self.fmt, cols=cols))


def cmd_login(ctx: Context) -> int:
    args = ctx.args
    stored = _stored_login()
    url = args.url or os.environ.get(config.URL_VARIABLE) or stored.get("url")
    if not url:
        raise UsageError("give the portal's address: gpuportal login --url https://portal.example")
    url = config.normalise_url(url)
    username = args.username or input("Username: ").strip()
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass("Password: ")
    name = args.token_name or f"gpuportal CLI on {socket.gethostname()}"[:100]
    with Client(url) as anonymous:
        try:
            made = anonymous.post(
                "auth/token/", {"username": username, "password": password, "name": name}
            )
        except ApiError as error:
            # Wrong credentials are the API's 400 without a field: an authentication failure.
            if isinstance(error.body, dict) and set(error.body) == {"non_field_errors"}:
                error.exit_code = exits.AUTH
            raise
    path = config.save_login(url=url, token=made["token"], token_id=made["id"], username=username)
    if ctx.fmt == "json":
        ctx.stdout.write(
            output.as_json(
                {"url": url, "username": username, "expiry": made["expiry"], "config": str(path)}
            )
        )
    else:
        ctx.stdout.write(
            f"Logged in to {url} as {username}; the token expires {made['expiry']}.\n"
            f"Saved in {path}.\n"
        )
    return exits.OK


def _stored_login() -> dict:
    try:
        return config.read_file()
    except config.ConfigError:
        return {}


def cmd_logout(ctx: Context) -> int:
    settings = ctx.settings()
    revoked = False
    if settings.token and settings.token_id is not None and settings.url:
        with Client(settings.url, settings.token) as api:
            try:
                api.delete(f"tokens/{int(settings.token_id)}/")
                revoked = True
            except ApiError as error:
                if error.exit_code not in (exits.AUTH, exits.NOT_FOUND):
                    raise  # the token may still work: keep it, so that logout can be retried
    removed = config.remove_file()
    if revoked:
        ctx.stdout.write("Logged out: the token is revoked and forgotten.\n")
    elif removed:
        ctx.stdout.write("Logged out: the token is forgotten.\n")
    else:
        ctx.stdout.write("Not logged in.\n")
    return exits.OK


def cmd_whoami(ctx: Context) -> int:
    me = ctx.api().get("me/")
    if ctx.fmt == "json":
        ctx.stdout.write(output.as_json(me))
        return exits.OK
    ctx.stdout.write(f"{me['username']} on {ctx.api().base_url}\n")
    return exits.OK


def cmd_teams(ctx: Context) -> int:
    body = ctx.api().get("teams/", page_size=ctx.args.limit)
    ctx.show(results(body), TEAM_COLUMNS)
    return exits.OK


def cmd_quota_request(ctx: Context) -> int:
    a = ctx.args
    body = {
        "team": a.team,
        "cluster": a.cluster,
        "gpus": a.gpus,
        "gpu_model": a.gpu_model,
        "gpu_resource": a.gpu_resource,
        "starts_on": a.starts_on,
        "ends_on": a.ends_on,
        "cpu_cores": a.cpu_cores,
        "memory_gib": a.memory_gib,
        "justification": a.justification,
    }
    made = ctx.api().post("quota-requests/", {k: v for k, v in body.items() if v is not None})
    ctx.show(made, QUOTA_RECORD)
    return exits.OK


def cmd_quota_list(ctx: Context) -> int:
    a = ctx.args
    body = ctx.api().get(
        "quota-requests/", team=a.team, cluster=a.cluster, state=a.state, page_size=a.limit
    )
    ctx.show(results(body), QUOTA_COLUMNS)
    return exits.OK


def read_job_file(path: str, stdin: TextIO) -> dict:
    """The job's fields from a YAML (or JSON) file, ``-`` for stdin: the body of
    ``POST /api/v1/jobs/``, or with a list of jobs under ``jobs`` that of
    ``POST /api/v1/jobs/batch/``. ``env`` may be a mapping of names to values."""
    try:
        text = stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror}") from None
    try:
        spec = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise UsageError(f"{path} is not valid YAML: {error}") from None
    if not isinstance(spec, dict):
        raise UsageError(f"{path} must hold a mapping of the job's fields (name, image, gpus, ...)")
    for job in spec["jobs"] if isinstance(spec.get("jobs"), list) else [spec]:
        env = job.get("env") if isinstance(job, dict) else None
        if isinstance(env, dict):
            job["env"] = [
                {"name": str(k), "value": "" if v is None else str(v)} for k, v in env.items()
            ]
    return spec


def cmd_jobs_submit(ctx: Context) -> int:
    a = ctx.args
    spec = read_job_file(a.file, sys.stdin)
    many = "jobs" in spec
    if many and a.name:
        raise UsageError("--name names one job; the file holds a list of jobs")
    for key in ("team", "cluster", "name"):
        if getattr(a, key):
            spec[key] = getattr(a, key)
    if many:
        ctx.show(ctx.api().post("jobs/batch/", spec)["jobs"], JOB_COLUMNS)
    else:
        ctx.show(ctx.api().post("jobs/", spec), JOB_RECORD)
    return exits.OK


def cmd_jobs_list(ctx: Context) -> int:
    a = ctx.args
    params = {
        "team": a.team,
        "cluster": a.cluster,
        "user": a.user,
        "state": a.state or None,
        "page_size": a.limit,
    }
    body = ctx.api().get("jobs/", **params)
    ctx.show(results(body), JOB_COLUMNS)
    return exits.OK


def cmd_jobs_show(ctx: Context) -> int:
    ctx.show(ctx.api().get(f"jobs/{ctx.args.job}/"), JOB_RECORD)
    return exits.OK


def cmd_jobs_stop(ctx: Context) -> int:
    ctx.show(ctx.api().post(f"jobs/{ctx.args.job}/cancel/"), JOB_RECORD)
    return exits.OK


def cmd_jobs_logs(ctx: Context) -> int:
    a = ctx.args
    api = ctx.api()
    if a.follow:
        return follow.follow_job_log(
            api,
            a.job,
            tail=a.tail,
            container=a.container,
            out=ctx.stdout,
            err=ctx.stderr,
        )
    body = api.get(f"jobs/{a.job}/logs/", tail=a.tail, container=a.container)
    if ctx.fmt == "json":
        ctx.stdout.write(output.as_json(body))
        return exits.OK
    ctx.stdout.write(body.get("log") or "")
    if not body.get("log") and body.get("detail"):
        ctx.stderr.write(f"{body['detail']}\n")
    return exits.OK


def cmd_completion(ctx: Context) -> int:
    ctx.stdout.write(completion.script(ctx.args.shell, build_parser()))
    return exits.OK


# --- the parser --------------------------------------------------------------------------------


def common_options(*, top: bool) -> argparse.ArgumentParser:
    """``--url`` and ``--output``, given before or after the command (``SUPPRESS`` below the top,
    so that a subcommand's missing option does not hide the top's)."""
    default = (lambda value: value) if top else (lambda value: argparse.SUPPRESS)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url",
        default=default(None),
        help=f"the portal's address (default: ${config.URL_VARIABLE}, else the one logged in to)",
    )
    common.add_argument(
        "-o",
        "--output",
        choices=output.FORMATS,
        default=default("table"),
        help="table (default) or json (the API's objects)",
    )
    return common


def build_parser() -> Parser:
    parser = Parser(
        prog="gpuportal",
        description="The GPU portal from the command line.",
        epilog="Exit codes: 0 ok, 1 bad input, 2 not logged in or not allowed, 3 not found, "
        "4 portal unreachable or failing, 5 not possible in the object's state.",
        parents=[common_options(top=True)],
    )
    parser.add_argument("--version", action="version", version=f"gpuportal {__version__}")
    leaf = [common_options(top=False)]
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands.required = True

    login = commands.add_parser(
        "login",
        parents=leaf,
        help="sign in and store an API token",
        description="Sign in with "
        "your username and password; the new API token is stored in "
        "$XDG_CONFIG_HOME/gpuportal/config.json (mode 0600).",
    )
    login.add_argument("-u", "--username")
    login.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    login.add_argument("--token-name", help="what the token is called on the API tokens page")
    login.set_defaults(run=cmd_login)

    logout = commands.add_parser("logout", parents=leaf, help="revoke and forget the token")
    logout.set_defaults(run=cmd_logout)

    whoami = commands.add_parser("whoami", parents=leaf, help="who the token signs in as")
    whoami.set_defaults(run=cmd_whoami)

    teams = commands.add_parser("teams", parents=leaf, help="your teams and your role in each")
    teams.add_argument("--limit", type=positive, default=DEFAULT_LIMIT)
    teams.set_defaults(run=cmd_teams)

    quota = commands.add_parser("quota", help="GPU quota requests")
    quota_commands = quota.add_subparsers(
        dest="quota_command", metavar="COMMAND", parser_class=Parser
    )
    quota_commands.required = True
    request = quota_commands.add_parser("request", parents=leaf, help="ask for GPU quota")
    request.add_argument("--team", required=True, help="team slug")
    request.add_argument("--cluster", required=True, help="cluster name")
    request.add_argument("--gpus", required=True, type=positive)
    request.add_argument("--gpu-model", help="a model the cluster has (default: any)")
    request.add_argument("--gpu-resource", help="default nvidia.com/gpu")
    request.add_argument("--starts-on", metavar="YYYY-MM-DD", help="default today")
    request.add_argument("--ends-on", metavar="YYYY-MM-DD", help="default open-ended")
    request.add_argument("--cpu-cores")
    request.add_argument("--memory-gib")
    request.add_argument("-j", "--justification", default="", help="what the GPUs are for")
    request.set_defaults(run=cmd_quota_request)
    quota_list = quota_commands.add_parser("list", parents=leaf, help="quota requests you see")
    quota_list.add_argument("--team", help="team slug")
    quota_list.add_argument("--cluster", help="cluster name")
    quota_list.add_argument("--state", choices=QUOTA_STATES)
    quota_list.add_argument("--limit", type=positive, default=DEFAULT_LIMIT)
    quota_list.set_defaults(run=cmd_quota_list)

    jobs = commands.add_parser("jobs", help="GPU jobs")
    job_commands = jobs.add_subparsers(dest="jobs_command", metavar="COMMAND", parser_class=Parser)
    job_commands.required = True
    submit = job_commands.add_parser(
        "submit",
        parents=leaf,
        help="submit a job (or a list of jobs) described in a YAML file",
        description="Submit the job that FILE describes: a YAML mapping of the fields of "
        "POST /api/v1/jobs/ (team, cluster, name, image, command, args, env, gpus, gpu_model, "
        "cpu_cores, memory_gib, max_runtime_seconds, priority, ...); env may be a mapping. "
        "A file with team, cluster and a list of such jobs under jobs submits them all in one "
        "call (POST /api/v1/jobs/batch/), all or none.",
    )
    submit.add_argument("-f", "--file", required=True, metavar="FILE", help="job YAML, - for stdin")
    submit.add_argument("--team", help="team slug (overrides the file's)")
    submit.add_argument("--cluster", help="cluster name (overrides the file's)")
    submit.add_argument("--name", help="job name (overrides the file's)")
    submit.set_defaults(run=cmd_jobs_submit)
    jobs_list = job_commands.add_parser(
        "list", parents=leaf, help="jobs of your teams, newest first"
    )
    jobs_list.add_argument("--team", help="team slug")
    jobs_list.add_argument("--cluster", help="cluster name")
    jobs_list.add_argument("--user", help="submitted by this username")
    jobs_list.add_argument(
        "--state", action="append", choices=JOB_STATES, help="repeat for several states"
    )
    jobs_list.add_argument("--limit", type=positive, default=DEFAULT_LIMIT)
    jobs_list.set_defaults(run=cmd_jobs_list)
    show = job_commands.add_parser("show", parents=leaf, help="one job, with why it waits")
    show.add_argument("job", type=job_id, metavar="JOB_ID")
    show.set_defaults(run=cmd_jobs_show)
    logs = job_commands.add_parser("logs", parents=leaf, help="a job's log")
    logs.add_argument("job", type=job_id, metavar="JOB_ID")
    logs.add_argument(
        "-f", "--follow", action="store_true", help="follow the log until the job ends"
    )
    logs.add_argument("--tail", type=int, default=100, help="last N lines (default 100)")
    logs.add_argument("--container", choices=CONTAINERS, default="main")
    logs.set_defaults(run=cmd_jobs_logs)
    stop = job_commands.add_parser("stop", parents=leaf, help="stop a job")
    stop.add_argument("job", type=job_id, metavar="JOB_ID")
    stop.set_defaults(run=cmd_jobs_stop)

    sessions.add_commands(commands, leaf)

    shell = commands.add_parser(
        "completion",
        help="print a shell completion script",
        description="Print a completion script: `source <(gpuportal completion bash)` in "
        "~/.bashrc, or `gpuportal completion zsh > ~/.zfunc/_gpuportal` (zsh).",
    )
    shell.add_argument("shell", choices=completion.SHELLS)
    shell.set_defaults(run=cmd_completion)
    return parser


def main(
    argv: list[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Run one command; returns its exit code (the console script exits with it)."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    parser = build_parser()
    try:
        # argparse writes usage, help and errors to sys.stdout / sys.stderr.
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            args = parser.parse_args(argv)
    except SystemExit as done:  # --help, --version, usage errors
        return done.code if isinstance(done.code, int) else exits.BAD_INPUT
    ctx = Context(args, stdout, stderr)
    try:
        return args.run(ctx)
    except UsageError as error:
        stderr.write(f"gpuportal: {error}\n")
        return exits.BAD_INPUT
    except ApiError as error:
        for line in str(error).splitlines():
            stderr.write(f"gpuportal: {line}\n")
        return error.exit_code
    except KeyboardInterrupt:
        stderr.write("\n")
        return exits.INTERRUPTED
    finally:
        ctx.close()


def run() -> None:
    sys.exit(main())
