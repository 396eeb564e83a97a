"""Pinned versions of everything the devcluster builds.

The cache directory and the build stamp are keyed by these, so changing one here forces a rebuild
into a fresh directory instead of mixing binaries from two releases.
"""

KUBERNETES_VERSION = "v1.36.3"
# The etcd release that k8s.io/kubernetes v1.36.3 itself requires (go.etcd.io/etcd/*/v3 v3.6.8).
ETCD_VERSION = "v3.6.8"
KWOK_VERSION = "v0.8.0"
KUEUE_VERSION = "v0.17.0"


def staging_version(kubernetes_version: str = KUBERNETES_VERSION) -> str:
    """Return the published version of the k8s.io staging modules for a Kubernetes release.

    Kubernetes publishes each staging module (k8s.io/api, k8s.io/client-go, ...) as v0.MINOR.PATCH
    for release v1.MINOR.PATCH.
    """
    major, minor, patch = kubernetes_version.lstrip("v").split(".")
    if major != "1":
        raise ValueError(f"unexpected Kubernetes major version in {kubernetes_version!r}")
    return f"v0.{minor}.{patch}"


def versions_key() -> str:
    """A single string naming every pinned version, used for the cache stamp."""
    return (
        f"kubernetes={KUBERNETES_VERSION} etcd={ETCD_VERSION} kwok={KWOK_VERSION} "
        f"kueue={KUEUE_VERSION}"
    )


# Files only (its CRDs, no binary): pinned by gomodules/gateway-api/go.mod, which must say the
# same (tests/unit/devcluster checks); not in ``versions_key``, so it never rebuilds a binary.
GATEWAY_API_VERSION = "v1.6.3"

# A tool the tests use (tests/integration/deploy: the Helm chart), not part of the cluster:
# pinned by gomodules/helm/go.mod, which must say the same (tests/unit/devcluster checks); not
# in ``versions_key`` either, so moving it rebuilds helm alone (builder.TOOL_BUILDS).
HELM_VERSION = "v3.22.0"

# The real node's container runtime (devcluster/real_node.py): the kubelet of Kubernetes v1.36
# needs containerd 2 (Debian bookworm has 1.6). Pinned by gomodules/containerd/go.mod, which must
# say the same; a tool like Helm, built alone when it moves.
CONTAINERD_VERSION = "v2.4.2"

# The devcluster's Gateway API implementation (devcluster/gateway.py), a pure-Go proxy that
# routes HTTPRoutes' weighted backends to the real node's pods. Pinned by gomodules/traefik/go.mod
# (which must say the same); a tool like Helm, built alone when it moves.
TRAEFIK_VERSION = "v3.7.13"

# The devcluster's storage provisioner (devcluster/storage.py): rancher's local-path-provisioner,
# which gives a PersistentVolumeClaim a directory on the real node. Pinned by
# gomodules/local-path-provisioner/go.mod (which must say the same); a tool like Helm, built alone
# when it moves.
LOCAL_PATH_PROVISIONER_VERSION = "v0.0.33"
