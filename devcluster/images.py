"""The portal's container images (its own and the notebook image), built here without a Docker
daemon.

A base image made from Debian's packages with mmdebstrap, from the mirror the machine's apt
already uses (so nothing comes from a container registry), cached by its suite and package list;
then the project's Dockerfile built on it by buildah, with ``--layers`` so an unchanged
``requirements.txt`` reuses its installed layer. buildah and podman share one image store:
podman runs what buildah built.

These machines run containers with runc only once podman's default rlimits are emptied: the
runtime would raise ``nofile``/``nproc``, and the process lacks ``CAP_SYS_RESOURCE``. Every call
here runs with ``CONTAINERS_CONF`` naming a file that says so.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from devcluster import builder, versions
from devcluster.log import progress

SUITE = "bookworm"
# What the Dockerfile needs of its base: Python 3.11 with venv (Debian's pip refuses to install
# into the system Python), and the CA certificates pip's downloads are checked against.
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates")
BASE_REPOSITORY = "localhost/gpuportal-base"
PORTAL_IMAGE = "localhost/gpu-portal:dev"
# The portal's default notebook image (JupyterLab; deploy/notebook/), built the same way.
NOTEBOOK_IMAGE = "localhost/gpu-portal-notebook:dev"
NOTEBOOK_CONTEXT = Path(__file__).resolve().parent.parent / "deploy" / "notebook"
LOCAL_CERTIFICATES = Path("/usr/local/share/ca-certificates")
# The sandbox every pod of the real node needs (devcluster/real_node.py), which nothing here can
# pull: Kubernetes' own pause.c, from the pinned Kubernetes module, compiled statically.
PAUSE_IMAGE = f"localhost/pause:{versions.KUBERNETES_VERSION}"
TOOLS = ("mmdebstrap", "buildah", "podman")


def cache_dir() -> Path:
    return builder.cache_root() / "images"


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def containers_conf() -> Path:
    """A containers.conf for buildah and podman that leaves the rlimits as they are."""
    path = cache_dir() / "containers.conf"
    text = (
        "[containers]\n"
        "# No rlimit raised: the runtime may not (no CAP_SYS_RESOURCE).\n"
        "default_ulimits = []\n"
    )
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return path


def container_env() -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": str(containers_conf())}


def run(*args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    """A buildah or podman command; its error output in the exception when it fails."""
    result = subprocess.run(
        list(args), capture_output=True, text=True, timeout=timeout, env=container_env()
    )
    if result.returncode != 0:
        output = (result.stdout + result.stderr)[-4000:]
        raise RuntimeError(f"{' '.join(args[:3])} failed ({result.returncode}):\n{output}")
    return result


def image_exists(name: str) -> bool:
    return (
        subprocess.run(
            ["podman", "image", "exists", name], env=container_env(), check=False
        ).returncode
        == 0
    )


def image_id(name: str) -> str:
    """The id of an image in podman's store (its configuration's digest)."""
    return run("podman", "image", "inspect", "--format", "{{.Id}}", name).stdout.strip()


def local_certificates() -> list[Path]:
    """The certificate authorities this machine adds to Debian's (an egress proxy's, say)."""
    return sorted(LOCAL_CERTIFICATES.glob("*.crt")) if LOCAL_CERTIFICATES.is_dir() else []


def base_image() -> str:
    """The Debian base, built once per suite, package list and local certificate authorities:
    the base trusts what this machine trusts, so pip in the Dockerfile reaches the package index
    the way the machine does."""
    certificates = local_certificates()
    identity = hashlib.sha256(" ".join((SUITE, *BASE_PACKAGES)).encode())
    for certificate in certificates:
        identity.update(certificate.read_bytes())
    key = identity.hexdigest()[:12]
    name = f"{BASE_REPOSITORY}:{key}"
    if image_exists(name):
        return name
    archive = cache_dir() / f"base-{key}.tar"
    if not archive.exists():
        progress(f"images: the base from Debian {SUITE}: {', '.join(BASE_PACKAGES)}")
        partial = archive.with_suffix(".partial")
        made = subprocess.run(
            [
                "mmdebstrap",
                "--variant=minbase",
                "--format=tar",
                f"--include={','.join(BASE_PACKAGES)}",
                *(
                    [
                        f"--customize-hook=copy-in {' '.join(map(str, certificates))} "
                        f"{LOCAL_CERTIFICATES}",
                        '--customize-hook=chroot "$1" update-ca-certificates',
                    ]
                    if certificates
                    else []
                ),
                SUITE,
                str(partial),
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if made.returncode != 0:
            raise RuntimeError(f"mmdebstrap failed ({made.returncode}):\n{made.stderr[-4000:]}")
        partial.rename(archive)
    run("podman", "import", str(archive), name)
    return name


def build_portal(context: Path, *, tag: str = PORTAL_IMAGE) -> str:
    """The project's Dockerfile built on the Debian base; returns the image's name."""
    return _build(context, tag)


def build_notebook(context: Path = NOTEBOOK_CONTEXT, *, tag: str = NOTEBOOK_IMAGE) -> str:
    """The notebook image (``context``: the directory of its Dockerfile, deploy/notebook/)
    built on the Debian base; returns the image's name. Its packages' layer is kept: a build
    with nothing changed takes seconds."""
    return _build(context, tag)


def _build(context: Path, tag: str) -> str:
    base = base_image()
    progress(f"images: building {tag} on {base}")
    run(
        "buildah",
        "bud",
        "--layers",
        "--build-arg",
        f"BASE_IMAGE={base}",
        "-f",
        str(context / "Dockerfile"),
        "-t",
        tag,
        str(context),
    )
    return tag


def pause_image() -> str:
    """The pause image of the pinned Kubernetes, built once."""
    if image_exists(PAUSE_IMAGE):
        return PAUSE_IMAGE
    kube = next(build for build in builder.MODULE_BUILDS if build.name == "kube")
    source = builder.module_source_dir(kube, "k8s.io/kubernetes")
    with tempfile.TemporaryDirectory(prefix="devcluster-pause-") as work:
        binary = Path(work) / "pause"
        subprocess.run(
            [
                "gcc",
                "-Os",
                "-static",
                f"-DVERSION={versions.KUBERNETES_VERSION}",
                "-o",
                str(binary),
                str(source / "build" / "pause" / "linux" / "pause.c"),
            ],
            check=True,
            capture_output=True,
        )
        container = run("buildah", "from", "scratch").stdout.strip()
        try:
            run("buildah", "copy", container, str(binary), "/pause")
            run(
                "buildah",
                "config",
                "--entrypoint",
                '["/pause"]',
                "--user",
                "65535:65535",
                container,
            )
            run("buildah", "commit", "--quiet", container, PAUSE_IMAGE)
        finally:
            run("buildah", "rm", container)
    progress(f"images: built {PAUSE_IMAGE} from Kubernetes' pause.c")
    return PAUSE_IMAGE
