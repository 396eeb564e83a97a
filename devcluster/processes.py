"""Detached background processes with pid files and log files in the state directory.

Each process runs in its own session (so it survives the shell that ran `up` and can be stopped as
a group). A pid file alone is not trusted: the pid must still be alive and its command line must
still mention the expected program, so a recycled pid is never signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def pid_file(run_dir: Path, name: str) -> Path:
    return run_dir / f"{name}.pid"


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def running_pid(run_dir: Path, name: str, marker: str) -> int | None:
    """The pid recorded for `name` if that process is alive and its command contains marker."""
    path = pid_file(run_dir, name)
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    if _is_zombie(pid) or marker not in _command_line(pid):
        return None
    return pid


def start(
    run_dir: Path,
    log_dir: Path,
    name: str,
    command: list[str],
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> int:
    """Start a command detached in its own session, logging to <log_dir>/<name>.log."""
    run_dir.mkdir(parents=True, exist_ok=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / f"{name}.log", "ab") as log, open(os.devnull, "rb") as devnull:
        log.write(
            f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%S')} starting: {' '.join(command)}\n".encode()
        )
        log.flush()
        process = subprocess.Popen(
            command,
            stdin=devnull,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            cwd=cwd,
            close_fds=True,
        )
    pid_file(run_dir, name).write_text(f"{process.pid}\n")
    _wait_for_exec(process)
    return process.pid


def _wait_for_exec(process: subprocess.Popen, timeout: float = 5.0) -> None:
    """Wait until /proc shows the new program's command line.

    Popen may return (after vfork) before the kernel has filled in the child's argument area, and
    until then /proc/<pid>/cmdline is empty, which running_pid() would take for a dead process.
    """
    program = os.fsdecode(process.args[0])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if _command_line(process.pid).startswith(program):
            return
        time.sleep(0.01)


def _reap(pid: int) -> None:
    """Collect the exit status when the process is our own child (started in this Python)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _group_alive(group: int) -> bool:
    """Whether any process of the group is still alive (zombies, dead but not yet reaped by
    whoever adopted them, do not count)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == group and fields[0] != "Z":
            return True
    return False


def stop(run_dir: Path, name: str, marker: str, timeout: float = 15.0) -> bool:
    """Stop a process group started by start(): SIGTERM, then SIGKILL, and return once none of
    the group is alive (its leader and every child it started). True if one was running."""
    pid = running_pid(run_dir, name, marker)
    pid_file(run_dir, name).unlink(missing_ok=True)
    if pid is None:
        return False
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(pid)
        if not _group_alive(pid):
            return True
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    while _group_alive(pid):
        _reap(pid)
        time.sleep(0.05)
    return True


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True if something accepts connections on host:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.3)
        return probe.connect_ex((host, port)) == 0


def wait_until(
    check: Callable[[], bool],
    timeout: float,
    what: str,
    interval: float = 0.2,
    on_timeout: Callable[[], str] | None = None,
) -> None:
    """Poll check() until it returns True; raise TimeoutError naming `what` otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:  # a component that is still starting may fail any way
            pass
        time.sleep(interval)
    detail = on_timeout() if on_timeout else ""
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")


def log_tail(log_dir: Path, name: str, lines: int = 25) -> str:
    """The last lines of a component's log, for error messages."""
    path = log_dir / f"{name}.log"
    if not path.exists():
        return ""
    tail = path.read_text(errors="replace").splitlines()[-lines:]
    return f"\n--- last lines of {path} ---\n" + "\n".join(tail)
