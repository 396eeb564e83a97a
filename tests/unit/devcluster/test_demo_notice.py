"""The demo's notice while its cluster is built (devcluster/demo_notice.py): the step it is at,
read from the progress lines of ``python -m devcluster up``, the time so far, and what waits."""

import io
import threading
import time

from devcluster import builder, demo_notice
from devcluster.demo_notice import BuildProgress

# Progress lines as `up` prints them on a machine where nothing is built (devcluster/builder.py,
# devcluster/cluster.py), with what the notice says after each.
FIRST_BUILD = [
    (
        "building v1.36.3 etcd=v3.6 ... into /root/.cache/gpuportal-devcluster/v1.36.3/bin "
        "(from nothing this takes many minutes)",
        "compiling its binaries (the first time takes many minutes)",
    ),
    ("go build etcd: .", "compiling etcd (part 1 of 4)"),
    (
        "  etcd: go: downloading go.etcd.io/etcd/server/v3 v3.6.5",
        "compiling etcd (part 1 of 4, downloading its Go modules)",
    ),
    (
        "  etcd: 212 packages so far, 30s elapsed",
        "compiling etcd (part 1 of 4, 212 packages so far)",
    ),
    ("  etcd: built etcd in 41s", None),
    (
        "go build kwok: sigs.k8s.io/kwok/cmd/kwok",
        "compiling kwok (the simulated nodes) (part 2 of 4)",
    ),
    (
        "go build kube: k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl",
        "compiling Kubernetes (part 3 of 4)",
    ),
    (
        "  kube: 1804 packages so far, 390s elapsed",
        "compiling Kubernetes (part 3 of 4, 1804 packages so far)",
    ),
    ("go build kueue: ./cmd/kueue", "compiling Kueue (part 4 of 4)"),
    ("  kueue: copied config/components/crd to /x/kueue", None),
    ("build finished in 913s", "starting it"),
    ("started etcd (pid 4242)", "starting etcd"),
    ("etcd is healthy", "starting it (etcd is up)"),
    ("applied Kueue's CRDs and objects in 2.1s", "installing Kueue"),
    (
        "creating nodes: 4 GPU (NVIDIA-A100-SXM4-80GB), 2 GPU (NVIDIA-H100-80GB-HBM3), 2 CPU-only",
        "creating its simulated GPU nodes",
    ),
    ("devcluster up in 931.4s", "it is up; installing the portal on it"),
]


def line(message: str) -> str:
    return f"[devcluster 12:34:56] {message}\n"


def test_the_step_follows_the_progress_lines_of_a_first_build():
    progress = BuildProgress()
    steps = []
    for message, _ in FIRST_BUILD:
        before = progress.step
        changed = progress.feed(line(message))
        assert changed == (progress.step != before), message
        steps.append((message, progress.step if changed else None))
    assert steps == [(message, expected) for message, expected in FIRST_BUILD]


def test_the_parts_are_the_cluster_builds_that_up_makes_not_the_tests_tools():
    assert demo_notice.PARTS == ("etcd", "kwok", "kube", "kueue")
    assert set(demo_notice.PARTS) == set(demo_notice.PART_NAMES)
    assert [b.name for b in builder.MODULE_BUILDS] == list(demo_notice.PARTS)
    assert not set(demo_notice.PARTS) & {b.name for b in builder.TOOL_BUILDS}


def test_lines_that_are_not_progress_leave_the_step_alone():
    progress = BuildProgress()
    progress.feed(line("go build kube: k8s.io/kubernetes/cmd/kube-apiserver"))

    for other in ("Traceback (most recent call last):\n", "go: downloading x v1\n", "\n"):
        assert not progress.feed(other)
    assert progress.step == "compiling Kubernetes (part 3 of 4)"


def test_a_cluster_already_built_is_starting_at_once():
    progress = BuildProgress()
    progress.feed(line("binaries for v1.36.3 already cached in /x/bin"))

    assert progress.step == "starting it"


def test_the_notice_says_the_step_the_time_so_far_and_what_waits():
    assert demo_notice.notice_text("compiling Kueue (part 4 of 4)", 12 * 60 + 5) == (
        "The local GPU cluster is being built: compiling Kueue (part 4 of 4), 12 minutes so "
        "far. Until it is up, reconciles, jobs and charts wait; they catch up on their own."
    )
    assert demo_notice.elapsed(59) == "under a minute so far"
    assert demo_notice.elapsed(60) == "1 minute so far"
    assert demo_notice.elapsed(-3) == "under a minute so far"


def test_follow_copies_the_lines_and_rewrites_the_notice_at_each_step(tmp_path):
    notice = tmp_path / "notice.txt"
    output = io.StringIO()
    lines = [line(message) for message, _ in FIRST_BUILD[:4]]

    demo_notice.follow(iter(lines), output, notice, since=time.time() - 125)

    assert output.getvalue() == "".join(lines)
    assert notice.read_text() == (
        demo_notice.notice_text("compiling etcd (part 1 of 4, 212 packages so far)", 125) + "\n"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["notice.txt"]  # no partial file left


def test_follow_keeps_the_time_so_far_moving_while_no_line_comes(tmp_path):
    notice = tmp_path / "notice.txt"
    release = threading.Event()

    def slow_lines():
        yield line("go build kube: k8s.io/kubernetes/cmd/kube-apiserver")
        release.wait(10)

    since = time.time() - 59.9
    follower = threading.Thread(
        target=demo_notice.follow,
        args=(slow_lines(), io.StringIO(), notice, since),
        kwargs={"refresh": 0.05},
    )
    follower.start()
    try:
        deadline = time.monotonic() + 10
        while "1 minute so far" not in (notice.read_text() if notice.exists() else ""):
            assert time.monotonic() < deadline, notice.read_text()
            time.sleep(0.02)
    finally:
        release.set()
        follower.join(10)
    assert "compiling Kubernetes (part 3 of 4), 1 minute so far" in notice.read_text()


def test_a_failed_start_says_why_and_where_the_log_is(tmp_path):
    log = tmp_path / "cluster.log"
    log.write_text(
        line("go build kube: k8s.io/kubernetes/cmd/kube-apiserver")
        + "devcluster: Go toolchain not found: install Go 1.26 or put `go` on PATH\n"
        + "\n"
    )
    notice = tmp_path / "notice.txt"

    assert demo_notice.main(["failed", str(notice), str(log)]) == 0

    text = notice.read_text()
    assert text.startswith(
        "The local GPU cluster did not come up: Go toolchain not found: install Go 1.26 or put "
        "`go` on PATH. Reconciles, jobs and charts wait for it."
    )
    assert str(log) in text


def test_a_step_of_the_demos_own_is_written_with_the_time_so_far(tmp_path):
    notice = tmp_path / "notice.txt"

    demo_notice.main(
        ["step", str(notice), "--since", str(time.time() - 181), "writing a week of GPU history"]
    )

    assert notice.read_text() == (
        demo_notice.notice_text("writing a week of GPU history", 181) + "\n"
    )
