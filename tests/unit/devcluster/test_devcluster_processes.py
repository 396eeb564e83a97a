"""Detached processes: pid files are trusted only while they name the expected program, and
stopping kills the whole process group."""

import os
import time
from pathlib import Path

from devcluster import processes


def test_a_started_process_is_found_by_its_pid_file_and_stopped_with_its_children(tmp_path):
    run_dir, log_dir = tmp_path / "run", tmp_path / "logs"
    pid = processes.start(
        run_dir, log_dir, "sleeper", ["sh", "-c", "sleep 300 & echo started; sleep 300"]
    )

    assert processes.running_pid(run_dir, "sleeper", "sleep 300") == pid
    deadline = time.monotonic() + 5
    while "started" not in (log_dir / "sleeper.log").read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)

    assert processes.stop(run_dir, "sleeper", "sleep 300") is True

    assert processes.running_pid(run_dir, "sleeper", "sleep 300") is None
    assert not (run_dir / "sleeper.pid").exists()
    assert _live_members_of_group(pid) == []


def test_a_pid_file_naming_another_program_is_not_trusted(tmp_path):
    (tmp_path / "imposter.pid").write_text(f"{os.getpid()}\n")

    assert processes.running_pid(tmp_path, "imposter", "kube-apiserver") is None
    assert processes.stop(tmp_path, "imposter", "kube-apiserver") is False


def _live_members_of_group(group):
    """Processes of the group that are not zombies (a zombie is dead, only not yet reaped)."""
    members = []
    for entry in os.listdir("/proc"):
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        state, process_group = fields[0], int(fields[3])
        if process_group == group and state != "Z":
            members.append(int(entry))
    return members
