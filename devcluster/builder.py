"""Build the pinned control-plane binaries from their Go modules into a cache outside the repo.

Three small Go modules live under devcluster/gomodules/ so that their dependency versions do not
fight: `kube` (k8s.io/kubernetes consumed as a dependency), `etcd` (a tiny main calling
etcdmain.Main) and `kwok`. Binaries land in `<cache>/<kubernetes-version>/bin/`; a stamp file keyed
by the pinned versions and the go.mod/go.sum contents lets later runs reuse them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from devcluster import gomod, versions
from devcluster.log import progress

GO_MODULES_DIR = Path(__file__).resolve().parent / "gomodules"
STAMP_NAME = ".devcluster-build-stamp"
DEFAULT_CACHE_ROOT = Path.home() / ".cache" / "gpuportal-devcluster"
# The language version written into the generated kube go.mod; k8s.io/kubernetes v1.36 needs 1.26.
GO_LANGUAGE_VERSION = "1.26.0"

KUBE_TOOLS = [
    "k8s.io/kubernetes/cmd/kube-apiserver",
    "k8s.io/kubernetes/cmd/kube-controller-manager",
    "k8s.io/kubernetes/cmd/kube-scheduler",
    "k8s.io/kubernetes/cmd/kubectl",
]


@dataclass(frozen=True)
class GoModuleBuild:
    """One Go module under gomodules/ and the binaries built from it."""

    name: str
    packages: tuple[str, ...]
    binaries: tuple[str, ...]
    ldflags: tuple[str, ...] = ()


def _kube_version_ldflags() -> tuple[str, ...]:
    """Stamp the version the binaries report, as the Kubernetes release build does."""
    version = versions.KUBERNETES_VERSION
    major, minor, _ = version.lstrip("v").split(".")
    flags = []
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {package}.gitVersion={version}",
            f"-X {package}.gitMajor={major}",
            f"-X {package}.gitMinor={minor}",
            f"-X {package}.gitTreeState=clean",
        ]
    return tuple(flags)


MODULE_BUILDS = (
    GoModuleBuild(name="etcd", packages=(".",), binaries=("etcd",)),
    GoModuleBuild(
        name="kwok",
        packages=("sigs.k8s.io/kwok/cmd/kwok",),
        binaries=("kwok",),
    ),
    GoModuleBuild(
        name="kube",
        packages=tuple(KUBE_TOOLS),
        binaries=tuple(tool.rsplit("/", 1)[1] for tool in KUBE_TOOLS),
        ldflags=_kube_version_ldflags(),
    ),
)

ALL_BINARIES = tuple(binary for build in MODULE_BUILDS for binary in build.binaries)


def cache_root() -> Path:
    """Root of the binary cache; DEVCLUSTER_CACHE overrides ~/.cache/gpuportal-devcluster."""
    override = os.environ.get("DEVCLUSTER_CACHE")
    return Path(override).expanduser() if override else DEFAULT_CACHE_ROOT


def bin_dir() -> Path:
    """Directory holding the binaries for the pinned Kubernetes version."""
    return cache_root() / versions.KUBERNETES_VERSION / "bin"


def binary(name: str) -> Path:
    """Path of one cached binary."""
    return bin_dir() / name


def go_executable() -> str:
    """Locate the Go toolchain (PATH first, then the usual /usr/local/go)."""
    found = shutil.which("go") or "/usr/local/go/bin/go"
    if not Path(found).exists():
        raise RuntimeError("Go toolchain not found: install Go 1.26 or put `go` on PATH")
    return found


def expected_stamp() -> str:
    """The stamp content for the current pins: versions plus a digest of every go.mod/go.sum."""
    digest = hashlib.sha256()
    for build in MODULE_BUILDS:
        for filename in ("go.mod", "go.sum", "main.go"):
            path = GO_MODULES_DIR / build.name / filename
            if path.exists():
                digest.update(f"{build.name}/{filename}\0".encode())
                digest.update(path.read_bytes())
    return f"{versions.versions_key()} gomodules-sha256={digest.hexdigest()}\n"


def is_built() -> bool:
    """True when every binary is cached and the stamp matches the current pins."""
    stamp = bin_dir() / STAMP_NAME
    if not stamp.exists() or stamp.read_text() != expected_stamp():
        return False
    return all(os.access(binary(name), os.X_OK) for name in ALL_BINARIES)


def _run_go_build(build: GoModuleBuild, out_dir: Path) -> None:
    """Run one `go build -v`, reporting package counts periodically instead of every line."""
    ldflags = " ".join(("-s", "-w", *build.ldflags))
    command = ["nice", "-n", "10", go_executable(), "build", "-v", "-trimpath",
               "-ldflags", ldflags, "-o", f"{out_dir}/", *build.packages]  # fmt: skip
    module_dir = GO_MODULES_DIR / build.name
    go_flags = " ".join(
        filter(None, [os.environ.get("GOFLAGS"), "-mod=readonly", "-buildvcs=false"])
    )
    env = {**os.environ, "GOFLAGS": go_flags, "GOTOOLCHAIN": "local"}
    started = time.monotonic()
    process = subprocess.Popen(
        command,
        cwd=module_dir,
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    compiled = 0
    tail: list[str] = []
    finished = threading.Event()

    def heartbeat() -> None:
        while not finished.wait(30):
            elapsed = time.monotonic() - started
            progress(f"  {build.name}: {compiled} packages so far, {elapsed:.0f}s elapsed")

    reporter = threading.Thread(target=heartbeat, daemon=True)
    reporter.start()
    assert process.stderr is not None
    for line in process.stderr:
        compiled += 1
        tail = [*tail[-39:], line.rstrip()]
        if line.startswith("go: downloading"):
            progress(f"  {build.name}: {line.strip()}")
    returncode = process.wait()
    finished.set()
    if returncode != 0:
        raise RuntimeError(
            f"go build of {build.name} failed (exit {returncode}); last output:\n" + "\n".join(tail)
        )
    progress(
        f"  {build.name}: built {', '.join(build.binaries)} in {time.monotonic() - started:.0f}s"
    )


def build(force: bool = False) -> Path:
    """Build every binary unless the cache already holds them; return the bin directory."""
    target = bin_dir()
    if is_built() and not force:
        progress(f"binaries for {versions.versions_key()} already cached in {target}")
        return target
    progress(
        f"building {versions.versions_key()} into {target} (from nothing this takes many minutes)"
    )
    target.mkdir(parents=True, exist_ok=True)
    (target / STAMP_NAME).unlink(missing_ok=True)
    started = time.monotonic()
    for module_build in MODULE_BUILDS:
        progress(f"go build {module_build.name}: {' '.join(module_build.packages)}")
        _run_go_build(module_build, target)
    (target / STAMP_NAME).write_text(expected_stamp())
    progress(f"build finished in {time.monotonic() - started:.0f}s")
    return target


def kubernetes_gomod_text() -> str:
    """Fetch k8s.io/kubernetes's own go.mod for the pinned version via the Go module proxy."""
    output = subprocess.run(
        [
            go_executable(),
            "mod",
            "download",
            "-json",
            f"k8s.io/kubernetes@{versions.KUBERNETES_VERSION}",
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=GO_MODULES_DIR / "kube",
    ).stdout
    return Path(json.loads(output)["GoMod"]).read_text()


def update_gomods() -> None:
    """Regenerate the kube go.mod from the pins and re-tidy every module (maintainer command)."""
    kube_dir = GO_MODULES_DIR / "kube"
    kube_gomod = gomod.render_kube_gomod(
        module_path="gpuportal.io/devcluster/kube",
        go_version=GO_LANGUAGE_VERSION,
        kubernetes_version=versions.KUBERNETES_VERSION,
        tools=KUBE_TOOLS,
        kubernetes_gomod=kubernetes_gomod_text(),
        staging_version=versions.staging_version(),
    )
    (kube_dir / "go.mod").write_text(kube_gomod)
    env = {**os.environ, "GOTOOLCHAIN": "local"}
    for module_build in MODULE_BUILDS:
        progress(f"go mod tidy in gomodules/{module_build.name}")
        subprocess.run(
            [go_executable(), "mod", "tidy"],
            cwd=GO_MODULES_DIR / module_build.name,
            env=env,
            check=True,
            stdout=sys.stderr,
        )
