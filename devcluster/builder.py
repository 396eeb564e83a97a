"""Build the pinned control-plane binaries from their Go modules into a cache outside the repo,
and fetch the files other Go modules ship (the Gateway API's CRDs: ``FILE_MODULES``).

Four small Go modules live under devcluster/gomodules/ so that their dependency versions do not
fight: `kube` (k8s.io/kubernetes consumed as a dependency), `etcd` (a tiny main calling
etcdmain.Main), `kwok` and `kueue`. Binaries land in `<cache>/<kubernetes-version>/bin/`, files a
module ships beside its code (Kueue's CRDs, webhook and RBAC manifests) in
`<cache>/<kubernetes-version>/<module>/`; a stamp file keyed by the pinned versions, the
go.mod/go.sum contents and the build recipe lets later runs reuse them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
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
    # The real node (devcluster/real_node.py): a kubelet and kube-proxy beside the kwok nodes.
    "k8s.io/kubernetes/cmd/kubelet",
    "k8s.io/kubernetes/cmd/kube-proxy",
]


# Kueue reads the certificates of its metrics and visibility servers from fixed absolute paths
# when its internal cert management is off; the build points both at this directory instead,
# relative to Kueue's working directory (the devcluster runs it in <state>/kueue).
KUEUE_CERT_DIR = "certs"


@dataclass(frozen=True)
class PatchedCopy:
    """A dependency's source file, copied with a one-line change into the Go module that builds
    it (`target`, inside gomodules/<name>/). Go refuses overlays of files in its module cache,
    so the copy is added to our own module with `go build -overlay` and never written to the
    repository. The build fails when `old` is not found exactly once, so a moved pin cannot
    silently build without the change."""

    module: str
    path: str  # inside the dependency
    target: str  # inside gomodules/<name>/
    old: str
    new: str


@dataclass(frozen=True)
class GoModuleBuild:
    """One Go module under gomodules/, the binaries built from it and the directories of its
    dependency's source tree that are copied beside them (`files_from`, paths in `files_module`)."""

    name: str
    packages: tuple[str, ...]
    binaries: tuple[str, ...]
    ldflags: tuple[str, ...] = ()
    patches: tuple[PatchedCopy, ...] = ()
    files_module: str = ""
    files_from: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    cgo: bool = True

    def recipe(self) -> str:
        """What besides go.mod/go.sum decides the binaries, for the stamp."""
        return repr(
            (
                self.packages,
                self.ldflags,
                self.patches,
                self.files_module,
                self.files_from,
                *((self.tags, self.cgo) if self.tags or not self.cgo else ()),
            )
        )


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
    GoModuleBuild(
        name="kueue",
        # Kueue's cmd/kueue/main.go, patched (below); the module also lists cmd/kueue as a
        # `tool`, which keeps `go mod tidy` requiring everything that file imports.
        packages=("./cmd/kueue",),
        binaries=("kueue",),
        ldflags=(
            f"-X sigs.k8s.io/kueue/pkg/version.GitVersion={versions.KUEUE_VERSION}",
            # A package variable, so the linker can set it (default "/visibility").
            f"-X sigs.k8s.io/kueue/pkg/visibility.certDir={KUEUE_CERT_DIR}",
        ),
        patches=(
            # A local variable in main(), which no linker flag reaches.
            PatchedCopy(
                module="sigs.k8s.io/kueue",
                path="cmd/kueue/main.go",
                target="cmd/kueue/main.go",
                old='metricsCertPath := "/etc/kueue/metrics/certs"',
                new=f'metricsCertPath := "{KUEUE_CERT_DIR}"',
            ),
        ),
        files_module="sigs.k8s.io/kueue",
        files_from=(
            "config/components/crd",
            "config/components/rbac",
            "config/components/visibility",
            "config/components/webhook",
        ),
    ),
)

ALL_BINARIES = tuple(binary for build in MODULE_BUILDS for binary in build.binaries)


def _helm_kube_version_ldflags() -> tuple[str, ...]:
    """The Kubernetes version Helm assumes without a cluster (`helm template`, `lint`), set as
    Helm's Makefile sets it: from the k8s.io/client-go its go.mod requires (v0.37.0: 1.37);
    unset, Helm would assume 1.20 and refuse a chart's kubeVersion."""
    go_mod = (GO_MODULES_DIR / "helm" / "go.mod").read_text()
    match = re.search(r"^\s*k8s\.io/client-go v0\.(\d+)\.\d+", go_mod, re.M)
    if match is None:
        raise RuntimeError("gomodules/helm/go.mod requires no k8s.io/client-go v0.X.Y")
    flags = []
    for package in ("helm.sh/helm/v3/pkg/lint/rules", "helm.sh/helm/v3/pkg/chartutil"):
        flags += [f"-X {package}.k8sVersionMajor=1", f"-X {package}.k8sVersionMinor={match[1]}"]
    return tuple(flags)


# Tools the tests use beside the cluster (not part of it): each is built into the same bin
# directory under a stamp of its own (``tool_stamp``), apart from the cluster's binaries', so
# adding or moving one never rebuilds kube, etcd, kwok or Kueue, and theirs never rebuild it.
TOOL_BUILDS = (
    # Helm, to lint and render the chart in deploy/helm (tests/integration/deploy).
    GoModuleBuild(
        name="helm",
        packages=("helm.sh/helm/v3/cmd/helm",),
        binaries=("helm",),
        ldflags=(
            f"-X helm.sh/helm/v3/internal/version.version={versions.HELM_VERSION}",
            "-X helm.sh/helm/v3/internal/version.gitTreeState=clean",
            *_helm_kube_version_ldflags(),
        ),
    ),
    # The real node's container runtime: containerd, its runc shim and ctr (to load images),
    # without cgo or the snapshotters that need it (the overlayfs one is what the node uses).
    GoModuleBuild(
        name="containerd",
        packages=(
            "github.com/containerd/containerd/v2/cmd/containerd",
            "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
            "github.com/containerd/containerd/v2/cmd/ctr",
        ),
        binaries=("containerd", "containerd-shim-runc-v2", "ctr"),
        ldflags=(
            f"-X github.com/containerd/containerd/v2/version.Version={versions.CONTAINERD_VERSION}",
        ),
        tags=("no_btrfs", "no_devmapper", "no_zfs"),
        cgo=False,
    ),
    # The devcluster's Gateway API implementation (devcluster/gateway.py): Traefik.
    GoModuleBuild(
        name="traefik",
        packages=("github.com/traefik/traefik/v3/cmd/traefik",),
        binaries=("traefik",),
        ldflags=(
            f"-X github.com/traefik/traefik/v3/pkg/version.Version={versions.TRAEFIK_VERSION}",
        ),
        cgo=False,
    ),
    # The devcluster's storage provisioner (devcluster/storage.py): local-path-provisioner, whose
    # main package is its module's root.
    GoModuleBuild(
        name="local-path-provisioner",
        packages=("github.com/rancher/local-path-provisioner",),
        binaries=("local-path-provisioner",),
        ldflags=(f"-X main.VERSION={versions.LOCAL_PATH_PROVISIONER_VERSION}",),
        cgo=False,
    ),
)


# Tools built on their first use (``build_tools(names=...)``), never by ``build``: only the
# benchmarks need them, and one test that checks them (so the suite builds them once, a minute
# on a fresh machine, beside the tests that need no build).
ON_DEMAND_BUILDS = (
    # Writes days of DCGM history straight into Prometheus TSDB blocks, with Prometheus's own
    # block writer (devcluster/backfill.py: the 5,000-GPU history of `make bench-scale`).
    GoModuleBuild(
        name="tsdb-backfill",
        packages=(".",),
        binaries=("tsdb-backfill",),
        cgo=False,
    ),
)


@dataclass(frozen=True)
class GoModuleFiles:
    """Files a Go module ships beside its code, copied into the cache without building anything
    (gomodules/<name>/ pins the module in its go.mod and go.sum; no `go mod tidy`, which would
    drop a requirement nothing imports). They have a stamp of their own, apart from the
    binaries': adding or moving them never rebuilds a binary."""

    name: str
    files_module: str
    files_from: tuple[str, ...]

    def stamp(self) -> str:
        digest = hashlib.sha256()
        for filename in ("go.mod", "go.sum"):
            digest.update((GO_MODULES_DIR / self.name / filename).read_bytes())
        return f"{self.files_module} {self.files_from} gomodules-sha256={digest.hexdigest()}\n"


# The Gateway API's CRDs (HTTPRoute and the rest of its standard channel), which inference
# services' traffic splits use; installed by `up` (devcluster.gateway_api).
FILE_MODULES = (
    GoModuleFiles(
        name="gateway-api",
        files_module="sigs.k8s.io/gateway-api",
        files_from=("config/crd/standard",),
    ),
)
FILES_STAMP_NAME = ".devcluster-files-stamp"


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


def module_files_dir(name: str) -> Path:
    """Where the files copied from a module build's dependency (`files_from`) are cached."""
    return bin_dir().parent / name


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
        digest.update(f"{build.name}/recipe\0{build.recipe()}".encode())
    return f"{versions.versions_key()} gomodules-sha256={digest.hexdigest()}\n"


def tool_stamp_path(tool: GoModuleBuild) -> Path:
    return bin_dir() / f"{STAMP_NAME}-{tool.name}"


def tool_stamp(tool: GoModuleBuild) -> str:
    """The stamp of one ``TOOL_BUILDS`` or ``ON_DEMAND_BUILDS`` entry: its go.mod, go.sum and
    main.go when it has its own, and its recipe."""
    digest = hashlib.sha256()
    for filename in ("go.mod", "go.sum", "main.go"):
        path = GO_MODULES_DIR / tool.name / filename
        if path.exists():
            digest.update(path.read_bytes())
    digest.update(tool.recipe().encode())
    return f"{tool.name} gomodules-sha256={digest.hexdigest()}\n"


def tool_built(tool: GoModuleBuild) -> bool:
    stamp = tool_stamp_path(tool)
    return (
        stamp.exists()
        and stamp.read_text() == tool_stamp(tool)
        and all(os.access(binary(name), os.X_OK) for name in tool.binaries)
    )


def build_tools(force: bool = False, names: tuple[str, ...] | None = None) -> None:
    """Build every ``TOOL_BUILDS`` entry (or those ``names`` names, ``ON_DEMAND_BUILDS`` among
    them) unless the cache holds it for its pins."""
    candidates = TOOL_BUILDS if names is None else (*TOOL_BUILDS, *ON_DEMAND_BUILDS)
    unknown = set(names or ()) - {tool.name for tool in candidates}
    if unknown:
        raise ValueError(f"no Go tool named {', '.join(sorted(unknown))}")
    bin_dir().mkdir(parents=True, exist_ok=True)
    for tool in candidates:
        if names is not None and tool.name not in names:
            continue
        if tool_built(tool) and not force:
            continue
        progress(f"go build {tool.name}: {' '.join(tool.packages)}")
        tool_stamp_path(tool).unlink(missing_ok=True)
        _run_go_build(tool, bin_dir())
        tool_stamp_path(tool).write_text(tool_stamp(tool))


def files_fetched(files: GoModuleFiles) -> bool:
    stamp = module_files_dir(files.name) / FILES_STAMP_NAME
    return stamp.exists() and stamp.read_text() == files.stamp()


def fetch_files(force: bool = False) -> None:
    """Copy every ``FILE_MODULES`` entry's files into the cache unless they are there for the
    pinned version (from Go's module cache, downloading the module the first time)."""
    for files in FILE_MODULES:
        if files_fetched(files) and not force:
            continue
        _copy_module_files(files)
        (module_files_dir(files.name) / FILES_STAMP_NAME).write_text(files.stamp())


def is_built() -> bool:
    """True when every binary and copied directory is cached and the stamp matches the pins."""
    stamp = bin_dir() / STAMP_NAME
    if not stamp.exists() or stamp.read_text() != expected_stamp():
        return False
    copied = [
        module_files_dir(build.name) / directory
        for build in MODULE_BUILDS
        for directory in build.files_from
    ]
    return all(os.access(binary(name), os.X_OK) for name in ALL_BINARIES) and all(
        path.is_dir() for path in copied
    )


def cluster_built() -> bool:
    """True when ``up`` has nothing to build: the cluster's binaries and the files fetched from
    Go modules are cached for the pins (the tests' tools are not its to build)."""
    return is_built() and all(files_fetched(files) for files in FILE_MODULES)


def nothing_to_build() -> bool:
    """True when ``build`` has nothing to do: the cluster's part and every tool are cached."""
    return cluster_built() and all(tool_built(tool) for tool in TOOL_BUILDS)


def _go_env() -> dict[str, str]:
    go_flags = " ".join(
        filter(None, [os.environ.get("GOFLAGS"), "-mod=readonly", "-buildvcs=false"])
    )
    return {**os.environ, "GOFLAGS": go_flags, "GOTOOLCHAIN": "local"}


def module_source_dir(build: GoModuleBuild | GoModuleFiles, module: str) -> Path:
    """A dependency's source tree in Go's module cache (downloaded first if it is not there),
    at the version the build's go.mod/go.sum pin."""
    output = subprocess.run(
        [go_executable(), "mod", "download", "-json", module],
        cwd=GO_MODULES_DIR / build.name,
        env=_go_env(),
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return Path(json.loads(output)["Dir"])


def patched_source(original: str, patch: PatchedCopy) -> str:
    """The file's text with the patch applied; ValueError unless `old` occurs exactly once."""
    count = original.count(patch.old)
    if count != 1:
        raise ValueError(
            f"{patch.module}/{patch.path}: expected {patch.old!r} exactly once, found it "
            f"{count} times; the pinned version changed, so review the patch in "
            "devcluster/builder.py"
        )
    return original.replace(patch.old, patch.new)


def _write_overlay(build: GoModuleBuild, work_dir: Path) -> Path:
    """The `go build -overlay` file that adds each patched copy to our module."""
    replace = {}
    for index, patch in enumerate(build.patches):
        original = module_source_dir(build, patch.module) / patch.path
        copy = work_dir / f"{index}-{original.name}"
        copy.write_text(patched_source(original.read_text(), patch))
        replace[str(GO_MODULES_DIR / build.name / patch.target)] = str(copy)
    overlay = work_dir / "overlay.json"
    overlay.write_text(json.dumps({"Replace": replace}, indent=2))
    return overlay


def _copy_module_files(build: GoModuleBuild | GoModuleFiles) -> None:
    """Copy `files_from` out of the module cache, so that `up` needs neither Go nor the
    module cache once the build is done."""
    if not build.files_from:
        return
    source = module_source_dir(build, build.files_module)
    target = module_files_dir(build.name)
    if target.exists():
        shutil.rmtree(target)
    for directory in build.files_from:
        for path in sorted((source / directory).rglob("*")):
            if path.is_file():
                # Contents only: the module cache's read-only modes would stick to the copies.
                copy = target / path.relative_to(source)
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, copy)
    progress(f"  {build.name}: copied {', '.join(build.files_from)} to {target}")


def _run_go_build(build: GoModuleBuild, out_dir: Path) -> None:
    """Run one `go build -v`, reporting package counts periodically instead of every line."""
    with tempfile.TemporaryDirectory(prefix=f"devcluster-{build.name}-") as work_dir:
        overlay = ["-overlay", str(_write_overlay(build, Path(work_dir)))] if build.patches else []
        _run_go_build_with(build, out_dir, overlay)
    _copy_module_files(build)


def _run_go_build_with(build: GoModuleBuild, out_dir: Path, overlay: list[str]) -> None:
    ldflags = " ".join(("-s", "-w", *build.ldflags))
    command = [
        "nice",
        "-n",
        "10",
        go_executable(),
        "build",
        "-v",
        "-trimpath",
        *(["-tags", ",".join(build.tags)] if build.tags else []),
        *overlay,
        "-ldflags",
        ldflags,
        "-o",
        f"{out_dir}/",
        *build.packages,
    ]
    module_dir = GO_MODULES_DIR / build.name
    env = {**_go_env(), **({} if build.cgo else {"CGO_ENABLED": "0"})}
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


def build(force: bool = False, *, tools: bool = True) -> Path:
    """Build every binary unless the cache already holds them; return the bin directory.
    ``tools=False``: the cluster's alone (what ``up`` needs; a tool is built on first use)."""
    target = bin_dir()
    if is_built() and not force:
        progress(f"binaries for {versions.versions_key()} already cached in {target}")
        fetch_files(force)
        if tools:
            build_tools(force)
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
    fetch_files(force)
    if tools:
        build_tools(force)
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
    for module_build in (*MODULE_BUILDS, *TOOL_BUILDS, *ON_DEMAND_BUILDS):
        progress(f"go mod tidy in gomodules/{module_build.name}")
        subprocess.run(
            [go_executable(), "mod", "tidy"],
            cwd=GO_MODULES_DIR / module_build.name,
            env=env,
            check=True,
            stdout=sys.stderr,
        )
