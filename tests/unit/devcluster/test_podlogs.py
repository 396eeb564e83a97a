"""The pieces of simulated container logs: CRI log lines and kwok's Logs objects."""

import datetime

from devcluster import podlogs


def test_a_log_line_is_in_the_cri_format_with_a_utc_timestamp():
    at = datetime.datetime(2026, 11, 30, 14, 5, 6, 789000, tzinfo=datetime.UTC)

    assert podlogs.cri_line("epoch 1 loss 0.5", at) == (
        "2026-11-30T14:05:06.789000Z stdout F epoch 1 loss 0.5\n"
    )


def test_appending_writes_whole_lines_to_the_pods_container_file(tmp_path):
    path = podlogs.log_path(tmp_path, "team-a", "train-0", "main")

    podlogs.append_lines(path, ["one", "two"])
    podlogs.append_lines(path, ["three"])

    assert path == tmp_path / "team-a" / "train-0" / "main.log"
    texts = [line.split(" ", 3)[3] for line in path.read_text().splitlines()]
    assert texts == ["one", "two", "three"]


def test_the_logs_object_names_the_pod_and_sends_each_container_to_its_file(tmp_path):
    files = {"main": tmp_path / "main.log", "prep": tmp_path / "prep.log"}

    body = podlogs.logs_object("team-a", "train-0", files)

    assert body["kind"] == "Logs"
    assert body["metadata"] == {"name": "train-0", "namespace": "team-a"}
    assert body["spec"]["logs"] == [
        {"containers": ["main"], "logsFile": str(tmp_path / "main.log")},
        {"containers": ["prep"], "logsFile": str(tmp_path / "prep.log")},
    ]
