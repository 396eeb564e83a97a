"""``gpuportal sessions``: interactive sessions (JupyterLab servers) through
``/api/v1/sessions/``: list, show, start, stop and resume. A session is shown with the address
to open it at; the server itself is the portal's to serve, to its owner signed in."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gpuportal import exits, output
from gpuportal.arguments import DEFAULT_LIMIT, not_negative, positive, session_id
from gpuportal.client import results

if TYPE_CHECKING:
    from gpuportal.cli import Context

SESSION_COLUMNS = output.columns(
    ("id", "id"),
    ("name", "name"),
    ("team", "team"),
    ("cluster", "cluster"),
    ("owner", "owner"),
    ("state", "state"),
    ("gpus", "gpus"),
    ("started", "started_at"),
)
SESSION_RECORD = output.columns(
    ("id", "id"),
    ("name", "name"),
    ("team", "team"),
    ("cluster", "cluster"),
    ("owner", "owner"),
    ("state", "state"),
    ("reason", "reason"),
    ("message", "message"),
    ("open", "open"),
    ("image", "image"),
    ("gpus", "gpus"),
    ("gpu model", "gpu_model"),
    ("cpu cores", "cpu_cores"),
    ("memory gib", "memory_gib"),
    ("home gib", "home_gib"),
    ("max lifetime hours", "max_lifetime_hours"),
    ("run", "run"),
    ("node", "node"),
    ("created", "created_at"),
    ("started", "started_at"),
    ("ends", "ends_at"),
    ("stopped", "stopped_at"),
    ("stop reason", "stop_reason"),
    ("idle since", "idle.since"),
    ("stops at (idle)", "idle.stop_at"),
    ("idle because", "idle.why"),
)


def show_session(ctx: Context, session: dict) -> None:
    """One session; in a table with the address to open it at (the API gives its path)."""
    if ctx.fmt == "table" and session.get("url"):
        session = {**session, "open": ctx.api().base_url + session["url"]}
    ctx.show(session, SESSION_RECORD)


def cmd_list(ctx: Context) -> int:
    body = ctx.api().get("sessions/", page_size=ctx.args.limit)
    ctx.show(results(body), SESSION_COLUMNS)
    return exits.OK


def cmd_show(ctx: Context) -> int:
    show_session(ctx, ctx.api().get(f"sessions/{ctx.args.session}/"))
    return exits.OK


def cmd_start(ctx: Context) -> int:
    a = ctx.args
    body = {
        "team": a.team,
        "cluster": a.cluster,
        "name": a.name,
        "image": a.image,
        "gpus": a.gpus,
        "gpu_model": a.gpu_model,
        "gpu_resource": a.gpu_resource,
        "cpu_cores": a.cpu_cores,
        "memory_gib": a.memory_gib,
        "max_lifetime_hours": a.max_lifetime_hours,
        "home_gib": a.home_gib,
    }
    made = ctx.api().post("sessions/", {k: v for k, v in body.items() if v is not None})
    show_session(ctx, made)
    return exits.OK


def cmd_stop(ctx: Context) -> int:
    show_session(ctx, ctx.api().post(f"sessions/{ctx.args.session}/stop/"))
    return exits.OK


def cmd_resume(ctx: Context) -> int:
    show_session(ctx, ctx.api().post(f"sessions/{ctx.args.session}/resume/"))
    return exits.OK


def add_commands(commands, leaf: list[argparse.ArgumentParser]) -> None:
    """``sessions`` and its commands under ``commands`` (the top parser's subparsers), each
    taking the ``leaf`` options (``--url``, ``--output``)."""
    sessions = commands.add_parser("sessions", help="interactive sessions (JupyterLab)")
    session_commands = sessions.add_subparsers(
        dest="sessions_command", metavar="COMMAND", parser_class=type(sessions)
    )
    session_commands.required = True

    listing = session_commands.add_parser(
        "list", parents=leaf, help="sessions of your teams, newest first"
    )
    listing.add_argument("--limit", type=positive, default=DEFAULT_LIMIT)
    listing.set_defaults(run=cmd_list)

    show = session_commands.add_parser(
        "show", parents=leaf, help="one session: its state, where to open it, its idleness"
    )
    show.add_argument("session", type=session_id, metavar="SESSION_ID")
    show.set_defaults(run=cmd_show)

    start = session_commands.add_parser(
        "start",
        parents=leaf,
        help="start a session (a JupyterLab server with your home volume)",
        description="Start a session; its address to open in a browser is printed (the "
        "portal serves it to you alone, signed in). Options left out take the portal's "
        "defaults.",
    )
    start.add_argument("--team", required=True, help="team slug")
    start.add_argument("--cluster", required=True, help="cluster name")
    start.add_argument("--name", required=True, help="a short name for people")
    start.add_argument("--image", help="default: the portal's JupyterLab image")
    start.add_argument("--gpus", type=not_negative, help="default 0: a CPU-only session")
    start.add_argument("--gpu-model", help="a model the cluster has (default: any)")
    start.add_argument("--gpu-resource", help="default nvidia.com/gpu")
    start.add_argument("--cpu-cores")
    start.add_argument("--memory-gib")
    start.add_argument("--max-lifetime-hours", type=positive, help="at most the team's maximum")
    start.add_argument(
        "--home-gib",
        type=positive,
        help="your home volume's size, the first time in the team on the cluster (then kept)",
    )
    start.set_defaults(run=cmd_start)

    stop = session_commands.add_parser(
        "stop", parents=leaf, help="stop a session (its home volume is kept)"
    )
    stop.add_argument("session", type=session_id, metavar="SESSION_ID")
    stop.set_defaults(run=cmd_stop)

    resume = session_commands.add_parser(
        "resume", parents=leaf, help="resume a stopped session (a new run, the same home)"
    )
    resume.add_argument("session", type=session_id, metavar="SESSION_ID")
    resume.set_defaults(run=cmd_resume)
