"""Write the configuration reference, docs/reference/configuration.md, from portal/settings.py.

Every environment variable the settings read through ``portal/env.py`` (``env``, ``env_bool``,
``env_int``, ``env_float``, ``env_list``, ``env_json``) is listed with its type, its default as
the settings spell it, and the comment above it in the settings as its description; the
variables the settings refuse under an old name come from their ``refuse_renamed`` call. The
settings are read with ``ast``, never imported, so the page does not depend on the environment
it is written in.

    .venv/bin/python scripts/settings_reference.py           # write the page
    .venv/bin/python scripts/settings_reference.py --check   # exit 1 if the page is out of date

``tests/unit/test_docs.py`` checks that the page in the repository is what this writes.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SETTINGS = REPO / "portal" / "settings.py"
PAGE = REPO / "docs" / "reference" / "configuration.md"

READS = {
    "env": "text",
    "env_bool": "boolean",
    "env_int": "whole number",
    "env_float": "number",
    "env_list": "comma-separated list",
    "env_json": "JSON",
}
# With no default given: what each read answers for an unset variable.
UNSET = {"env": "unset", "env_list": "empty"}

# The page's sections, by the variable's first word (DATABASE_URL goes with Django's own). A
# variable of another prefix stops the script: give its section a title here.
SECTIONS = {
    "DJANGO": "Django",
    "PORTAL": "The portal",
    "AXES": "Sign-in lockouts",
    "OIDC": "Single sign-on",
    "CELERY": "Celery",
    "BILLING": "Budgets",
    "WEBHOOKS": "Webhooks",
    "GPUJOBS": "GPU jobs and the watcher",
    "SERVING": "Inference services",
    "SESSIONS": "Interactive sessions",
    "MONITORING": "Monitoring",
    "SHARING": "Sharing layouts",
}
SECTION_OF = {"DATABASE_URL": "DJANGO"}

# Variables with no comment of their own whose paragraph's comment is about a neighbour: they get
# their note only. The script stops when one of them has a comment of its own (drop it here).
NOT_THEIR_PARAGRAPH = {
    "CELERY_TASK_DEFAULT_QUEUE",
    "CELERY_TASK_ALWAYS_EAGER",
    "GPUJOBS_RESYNC_SECONDS",
    "SERVING_RESYNC_SECONDS",
    "PORTAL_GRANT_REMINDER_CHECK_SECONDS",
    "GPUJOBS_LOG_FOLLOW_MAX_SECONDS",
}

# What the settings' comments do not say about a variable (kept here rather than in the
# settings, which are product code): shown in the "Notes" column. A variable the settings no
# longer read stops the script, so a note never outlives its variable.
NOTES = {
    "DJANGO_DEBUG": "Off in production, which then requires `DJANGO_SECRET_KEY`.",
    "DJANGO_SECRET_KEY": "A demo-only key while debugging; required with `DJANGO_DEBUG=0`.",
    "DJANGO_ALLOWED_HOSTS": "Comma-separated.",
    "DJANGO_CSRF_TRUSTED_ORIGINS": "Comma-separated origins, e.g. `https://gpus.example.com`.",
    "DJANGO_SECURE_PROXY_SSL_HEADER": (
        "The header a TLS-terminating proxy sets to `https`; `none` trusts no header."
    ),
    "DJANGO_SECURE_SSL_REDIRECT": "Redirect plain http to https.",
    "DJANGO_SESSION_COOKIE_SECURE": "Cookies over https only.",
    "DJANGO_CSRF_COOKIE_SECURE": "Cookies over https only.",
    "DJANGO_SECURE_HSTS_SECONDS": "HSTS: browsers use https only.",
    "DATABASE_URL": (
        "PostgreSQL in `make test` and compose (`make test-fast` ignores it). The connect "
        "timeout in it (`?connect_timeout=3`) bounds `/readyz`'s check."
    ),
    "DJANGO_CONN_MAX_AGE": (
        "Seconds a database connection is kept between requests (not with a pool)."
    ),
    "DJANGO_DB_POOL_MAX_SIZE": (
        "PostgreSQL connections each process keeps in its pool (0: none, a connect per "
        "request); the image sets `8`."
    ),
    "DJANGO_AUTHENTICATION_BACKENDS": "Add an OIDC backend here for single sign-on.",
    "DJANGO_LOGIN_URL": "Point at the SSO start view with OIDC.",
    "OIDC_ENABLED": "`1` to turn single sign-on on.",
    "OIDC_PROVIDER_NAME": "The sign-in button's name, e.g. `Keycloak`.",
    "OIDC_RP_CLIENT_SECRET": "May come from `OIDC_RP_CLIENT_SECRET_FILE`.",
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "From the provider's `.well-known/openid-configuration`.",
    "OIDC_GROUP_MAPPING": "JSON: provider group -> team role or portal admin.",
    "AXES_FAILURE_LIMIT": "Failed sign-ins per username and address that lock out.",
    "PORTAL_LOGIN_ADDRESS_FAILURE_LIMIT": "Failed sign-ins per address that lock it out.",
    "AXES_COOLOFF_SECONDS": "The cool-off (sets `AXES_COOLOFF_TIME`).",
    "PORTAL_PROXY_COUNT": (
        "Reverse proxies in front that append to `X-Forwarded-For` (the client's address for "
        "sign-in lockouts)."
    ),
    "PORTAL_API_TOKEN_DAYS": "Lifetime of a token made by signing in through the API.",
    "PORTAL_API_TOKEN_MAX_DAYS": "The longest a token may last.",
    "PORTAL_API_TOKENS_PER_USER": "How many tokens a user may hold.",
    "DJANGO_STATIC_ROOT": "Where `collectstatic` puts the files WhiteNoise serves.",
    "CELERY_BROKER_URL": "Celery broker.",
    "CELERY_TASK_DEFAULT_QUEUE": "The queue tasks go to when no route names another.",
    "CELERY_TASK_ALWAYS_EAGER": "Run tasks in the caller (never in production).",
    "CELERY_BROKER_TRANSPORT_OPTIONS_VISIBILITY_TIMEOUT": (
        "Seconds before Redis delivers again a task whose worker died."
    ),
    "CELERY_BROKER_TRANSPORT_OPTIONS_UNACKED_RESTORE_INTERVAL": (
        "Seconds between Redis's checks for such tasks."
    ),
    "PORTAL_REDIS_URL": "The Redis the web workers share counts in.",
    "PORTAL_RECONCILE_SWEEP_SECONDS": "How often every team is reconciled (drift repair).",
    "PORTAL_INVENTORY_SYNC_SECONDS": "How often GPU capacity is read from the clusters' nodes.",
    "PORTAL_IDLE_CHECK_EVERY_SECONDS": "How often idle GPUs are looked for.",
    "GPUJOBS_RESYNC_SECONDS": (
        "How often beat runs the jobs' resync: queued jobs nobody is creating are enqueued "
        "again, and active jobs brought in line with their clusters from full lists."
    ),
    "SERVING_RESYNC_SECONDS": (
        "How often beat brings the services' revisions in line from full lists (and a watcher "
        "that starts lists everything)."
    ),
    "PORTAL_GRANT_REMINDER_CHECK_SECONDS": "How often grants that end soon are looked for.",
    "PORTAL_GRANT_REMINDER_DAYS": (
        "One figure for every cluster, once per grant and end date, with a link to a request "
        "prefilled to extend it."
    ),
    "WEBHOOKS_TIMEOUT_SECONDS": "How long a webhook's receiver may take to answer, in all.",
    "WEBHOOKS_ALLOWED_INTERNAL_HOSTS": (
        "Internal hosts webhooks may post to: names, addresses or CIDR networks."
    ),
    "WEBHOOKS_MAX_ATTEMPTS": "Attempts per delivery before it is failed.",
    "WEBHOOKS_RETRY_MAX_SECONDS": "Keep it below the broker's visibility timeout.",
    "WEBHOOKS_SWEEP_SECONDS": "How often beat sends deliveries that are due and nobody is sending.",
    "WEBHOOKS_QUEUE": (
        "Run a worker that reads it (`celery -A portal worker -Q webhooks`), apart from the "
        "default queue's."
    ),
    "DJANGO_CACHE_URL": (
        "A Redis for Django's cache, shared by every web worker: compose, `make test` and "
        "`make bench` set it."
    ),
    "DJANGO_EMAIL_HOST": "E-mail for idle-GPU notices; none goes out without a host.",
    "PORTAL_BASE_URL": "Where e-mails and webhooks link to; a webhook may not point here.",
    "PORTAL_NAME": (
        "Also the field manager and `managed-by` label on cluster objects, and the prefix of "
        "the team roles and admission policies on the clusters."
    ),
    "PORTAL_MAX_GPUS_PER_REQUEST": "Larger requests are refused as typos.",
    "PORTAL_RECONCILE_RETRY_BACKOFF_MAX": "Retries of a reconcile that met a transient error.",
    "PORTAL_TEAM_MAX_PODS": "Pods per team namespace.",
    "PORTAL_CONTAINER_DEFAULT_CPU_REQUEST_MILLICORES": (
        "Container defaults of each team namespace's LimitRange."
    ),
    "GPUJOBS_LOG_FOLLOW_MAX_SECONDS": (
        "The longest one follow of a job's log lasts; the command-line client then asks again."
    ),
    "GPUJOBS_LOG_FOLLOWS_PER_USER": "429 beyond it.",
    "GPUJOBS_LOG_FOLLOWS_TOTAL": "429 beyond it.",
    "GPUJOBS_WATCHER_LEADER_ELECTION": (
        "Per cluster only the holder of the Lease `<name>-<cluster>` in `PORTAL_NAMESPACE` "
        "follows it (the chart's `watcher.leaderElection.*`)."
    ),
    "PORTAL_LOG_LEVEL": "`DEBUG`, `INFO`, `WARNING`, `ERROR` or `CRITICAL`.",
}

INTRO = """\
# Configuration reference

<!-- Written by scripts/settings_reference.py from portal/settings.py: do not edit by hand.
     Run `make docs` (or the script) after changing the settings; tests/unit/test_docs.py
     fails while this page differs from what the script writes. -->

Every environment variable `portal/settings.py` reads, in the order it reads them, grouped by
the comment above them in the settings (their description). The rules every variable follows
(names, strict values, `_FILE`) and the settings made elsewhere (per cluster, in the Django
admin and the portal) are in [Configuring the portal](../deploying/configuration.md).

- **Type**: a *boolean* takes `1`, `true`, `yes`, `on`, `0`, `false`, `no`, `off`; a value
  that is not what its type needs stops the portal at start, naming the variable. An empty
  value counts as unset.
- **Default**: as `portal/settings.py` writes it, a Python expression where it depends on
  another setting (`not DEBUG`: on when `DJANGO_DEBUG` is off).
- Any variable may instead name a file holding its value, with a `_FILE` suffix
  (`DJANGO_SECRET_KEY_FILE=/run/secrets/key`), but not both.
"""


@dataclass
class Variable:
    name: str
    read: str
    default: str
    setting: str
    description: str
    line: tuple[int, int]


def comment_lines(source: str) -> dict[int, tuple[int, str]]:
    """Line number -> (column, text) of every line that holds nothing but a comment."""
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and not token.line[: token.start[1]].strip():
            found[token.start[0]] = (token.start[1], token.string.lstrip("#").strip())
    return found


def block_above(line: int, column: int, lines: list[str], comments: dict) -> str | None:
    """The comment block (at ``column``) that ends on the line just above ``line``."""
    texts = []
    at = line - 1
    while at in comments and comments[at][0] == column:
        texts.insert(0, comments[at][1])
        at -= 1
    return " ".join(texts) or None


def paragraph_comment(line: int, name: str, lines: list[str], comments: dict) -> str | None:
    """A top-level comment block above ``line`` with no blank line between: the nearest that
    names the variable, else the nearest."""
    blocks = []
    at = line - 1
    while at >= 1 and lines[at - 1].strip():
        if at in comments and comments[at][0] == 0 and (at + 1) not in comments:
            blocks.append(block_above(at + 1, 0, lines, comments))
        at -= 1
    pattern = re.compile(rf"\b{re.escape(name)}\b")
    return next((block for block in blocks if pattern.search(block)), blocks[0] if blocks else None)


def render_default(node: ast.expr | None, read: str, source: str) -> str:
    if node is None:
        return UNSET[read]
    if isinstance(node, ast.Constant):
        value = node.value
        if value == "" and read in UNSET:
            return UNSET[read]
        if isinstance(value, bool):
            return "on" if value else "off"
        if isinstance(value, str):
            return f"`{value}`"
        return f"`{value!r}`"
    text = f"`{ast.get_source_segment(source, node)}`"
    try:
        value = _arithmetic(node)
    except ValueError:
        return text
    return f"{text} ({value})"


def _arithmetic(node: ast.expr) -> int | float:
    """The value of constant arithmetic (``35 * 24 * 3600``); ValueError for anything else."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Add | ast.Sub):
        left, right = _arithmetic(node.left), _arithmetic(node.right)
        if isinstance(node.op, ast.Mult):
            return left * right
        return left + right if isinstance(node.op, ast.Add) else left - right
    raise ValueError(node)


def setting_of(tree: ast.Module, statement: ast.stmt, call: ast.Call) -> str:
    """The setting a read sets: what it is assigned to (with the dict key it is under), or for
    a private name (``_proxy_ssl_header``) the setting made from it."""
    for node in ast.walk(statement):
        if isinstance(node, ast.Assign) and any(inner is call for inner in ast.walk(node.value)):
            target = ast.unparse(node.targets[0])
            if target.startswith("_"):
                return _made_from(tree, target) or target
            return target + "".join(f"[{key}]" for key in _key_path(node.value, call) or [])
    return ""


def _made_from(tree: ast.Module, private: str) -> str | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(inner, ast.Name) and inner.id == private for inner in ast.walk(node.value)
        ):
            return ast.unparse(node.targets[0])
    return None


def _key_path(node: ast.AST, call: ast.Call) -> list[str] | None:
    """The dict keys (``'pool'``, ``'timeout'``) under which ``call`` sits in ``node``."""
    if node is call:
        return []
    if isinstance(node, ast.Dict):
        for key, value in zip(node.keys, node.values, strict=True):
            path = _key_path(value, call)
            if path is not None:
                return [repr(key.value), *path] if isinstance(key, ast.Constant) else path
        return None
    for child in ast.iter_child_nodes(node):
        path = _key_path(child, call)
        if path is not None:
            return path
    return None


def statements_around(tree: ast.Module, call: ast.Call) -> list[ast.stmt]:
    """The statements that hold ``call``, innermost first."""
    chain: list[ast.stmt] = []

    def visit(statements: list[ast.stmt]) -> bool:
        for statement in statements:
            if any(node is call for node in ast.walk(statement)):
                chain.insert(0, statement)
                for field in ("body", "orelse"):
                    inner = getattr(statement, field, None)
                    if isinstance(inner, list) and visit(inner):
                        break
                return True
        return False

    visit(tree.body)
    return chain


def read_variables(source: str) -> tuple[list[Variable], dict[str, str]]:
    tree = ast.parse(source)
    lines = source.splitlines()
    comments = comment_lines(source)
    renamed: dict[str, str] = {}
    variables: list[Variable] = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
            continue
        if call.func.id == "refuse_renamed":
            (mapping,) = call.args
            for old, new in zip(mapping.keys, mapping.values, strict=True):
                renamed[ast.literal_eval(old)] = ast.literal_eval(new)
        if call.func.id not in READS:
            continue
        name = ast.literal_eval(call.args[0])
        default = call.args[1] if len(call.args) > 1 else None
        chain = statements_around(tree, call)
        # The comment just above the read, or above a statement that holds it (innermost
        # first); else the comment of its paragraph (the statements above it with no blank line
        # between), the one that names the variable if any does.
        description = None
        indent = len(lines[call.lineno - 1]) - len(lines[call.lineno - 1].lstrip())
        for line, column in [(call.lineno, indent)] + [
            (statement.lineno, statement.col_offset) for statement in chain
        ]:
            description = block_above(line, column, lines, comments)
            if description:
                break
        if name in NOT_THEIR_PARAGRAPH:
            if description:
                raise SystemExit(
                    f"{name} has a comment of its own: take it off NOT_THEIR_PARAGRAPH"
                )
        elif not description:
            description = paragraph_comment(chain[-1].lineno, name, lines, comments)
        variables.append(
            Variable(
                name=name,
                read=call.func.id,
                default=render_default(default, call.func.id, source),
                setting=setting_of(tree, chain[-1], call),
                description=description or "",
                line=(call.lineno, call.col_offset),
            )
        )
    variables.sort(key=lambda variable: variable.line)
    return variables, renamed


def section_of(name: str) -> str:
    prefix = SECTION_OF.get(name, name.split("_")[0])
    if prefix not in SECTIONS:
        raise SystemExit(f"{name}: no section for the prefix {prefix}; add it to SECTIONS")
    return prefix


def cell(text: str) -> str:
    return text.replace("|", "\\|")


CODE_SPAN = re.compile(r"(``.+?``|`[^`]+`)")


def inline(comment: str) -> str:
    """A comment as Markdown text: code spans kept, what Markdown would read as markup escaped."""
    parts = CODE_SPAN.split(comment)
    for index in range(0, len(parts), 2):
        text = parts[index].replace("\\", "\\\\")
        for char in "*[]":
            text = text.replace(char, "\\" + char)
        parts[index] = text.replace("<", "&lt;")
    return "".join(parts)


def render(source: str) -> str:
    variables, renamed = read_variables(source)
    names = {variable.name for variable in variables}
    unknown = sorted(set(NOTES) - names)
    if unknown:
        raise SystemExit(f"notes for variables the settings no longer read: {unknown}")
    out = [INTRO]
    for prefix, title in SECTIONS.items():
        members = [v for v in variables if section_of(v.name) == prefix]
        if not members:
            continue
        out.append(f"## {title}\n")
        groups: list[list[Variable]] = []
        for variable in members:
            if groups and groups[-1][-1].description == variable.description:
                groups[-1].append(variable)
            else:
                groups.append([variable])
        for group in groups:
            if group[0].description:
                out.append(inline(group[0].description) + "\n")
            out.append("| Variable | Type | Default | Sets | Notes |")
            out.append("| --- | --- | --- | --- | --- |")
            for variable in group:
                out.append(
                    f"| `{variable.name}` | {READS[variable.read]} | {cell(variable.default)} "
                    f"| `{variable.setting}` | {cell(NOTES.get(variable.name, ''))} |"
                )
            out.append("")
    out.append("## Renamed variables\n")
    out.append(
        "The portal refuses to start with one of these set under its old name (the value would "
        "be ignored): set the new one instead.\n"
    )
    out.append("| Old name | New name |")
    out.append("| --- | --- |")
    out.extend(f"| `{old}` | `{new}` |" for old, new in renamed.items())
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    args = parser.parse_args(argv)
    page = render(SETTINGS.read_text())
    if args.check:
        if not PAGE.exists() or PAGE.read_text() != page:
            print(f"{PAGE.relative_to(REPO)} is out of date: run {__file__}", file=sys.stderr)
            return 1
        return 0
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(page)
    print(f"wrote {PAGE.relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
