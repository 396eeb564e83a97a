"""pytest plugin providing the session-scoped `devcluster` fixture.

Enable with `-p devcluster.pytest_plugin` or `pytest_plugins = ["devcluster.pytest_plugin"]`.

The fixture reuses a devcluster that is already running and healthy, otherwise starts a fresh one
(building the binaries first if the cache is empty): no namespace, pod or metric an earlier run left
behind is there. A cluster the fixture started is stopped at the end of
the session by the last test session still using it; a cluster someone started by hand is never
stopped. Set DEVCLUSTER_KEEP=1 to leave a fixture-started cluster running for the next session.

`devcluster_second` does the same for a second cluster beside the first: the next instance
(DEVCLUSTER_INSTANCE + 1, so instance 2 by default) with its own ports, state directory and a
node set of its own (``cluster.SECOND_INSTANCE_NODES``). Only sessions that ask for it start it.

On instance 1, `real_node` adds the node that runs real containers, `gateway` the gateway
serving HTTPRoutes, `storage` the storage provisioner (the default StorageClass) and
`notebook_image` the notebook image on the real node.

`gpu_sharing` (module-scoped) adds the GPU sharing nodes (a MIG node, a time-sliced node and a
whole-GPU node to repartition: ``api.GpuSharing``) for one test module and deletes them after it,
so that the other modules see the default nodes' GPUs only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster import api, cluster, images, settings
from devcluster import dcgm_metrics as dcgm_metrics_module
from devcluster import dcgm_simulator as dcgm_simulator_module
from devcluster import gateway as gateway_module
from devcluster import gpu_sharing as gpu_sharing_module
from devcluster import real_node as real_node_module
from devcluster import sharing_manager as sharing_manager_module
from devcluster import storage as storage_module
from devcluster.cluster import STARTED_BY_PYTEST_FLAG
from devcluster.log import progress
from devcluster.settings import Settings


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "devcluster: runs against the local Kubernetes devcluster (devcluster/)"
    )
    config.addinivalue_line("markers", "integration: needs real services")


def _sessions_dir(settings: Settings) -> Path:
    return settings.state_dir / "pytest-sessions"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _other_live_sessions(settings: Settings) -> list[int]:
    live = []
    for lease in _sessions_dir(settings).glob("*"):
        if not lease.name.isdigit() or int(lease.name) == os.getpid():
            continue
        if _pid_alive(int(lease.name)):
            live.append(int(lease.name))
        else:
            lease.unlink(missing_ok=True)
    return live


@pytest.fixture(scope="session")
def devcluster() -> Iterator[api.DevCluster]:
    """A running devcluster: `.kubeconfig`, `.prometheus_url`, `.api_client()`, `.mint()`,
    `.add_gpu_node()`, `.remove_node()`, `.prometheus_query()`, `.backfill()`."""
    yield from _session_cluster(Settings.from_env())


@pytest.fixture(scope="session")
def devcluster_second() -> Iterator[api.DevCluster]:
    """A second running devcluster beside `devcluster` (the next instance), started, reused and
    stopped as `devcluster` is; its nodes are ``cluster.SECOND_INSTANCE_NODES`` (unless the
    DEVCLUSTER_*_NODES variables say otherwise)."""
    yield from _session_cluster(Settings.from_env(settings.instance_from_env() + 1))


@pytest.fixture(scope="session")
def real_node(devcluster) -> api.RealNode:
    """The devcluster's node that runs real containers, added to the cluster on first use and
    stopped with it: `.name`, `.node_selector`, `.toleration`, `.load_image(name)`."""
    try:
        cluster.start_real_node(devcluster.settings)
    except real_node_module.RealNodeUnavailable as error:
        pytest.fail(str(error), pytrace=False)
    return api.RealNode(devcluster.settings)


@pytest.fixture(scope="session")
def gateway(devcluster, real_node) -> api.Gateway:
    """The devcluster's gateway (Traefik) serving HTTPRoutes attached to its Gateway
    (`.reference`) at `.url`, to the real node's pods; started on first use, stopped with the
    cluster."""
    try:
        cluster.start_gateway(devcluster.settings)
    except gateway_module.GatewayUnavailable as error:
        pytest.fail(str(error), pytrace=False)
    return api.Gateway(devcluster.settings)


@pytest.fixture(scope="session")
def storage(devcluster, real_node) -> api.Storage:
    """The devcluster's storage provisioner: claims of the default StorageClass
    (`.storage_class`, ``local-path``) get a directory on the real node (`.volumes_dir`);
    started on first use, stopped with the cluster."""
    try:
        helper_image = cluster.start_storage(devcluster.settings)
    except storage_module.StorageUnavailable as error:
        pytest.fail(str(error), pytrace=False)
    return api.Storage(devcluster.settings, helper_image=helper_image)


@pytest.fixture(scope="session")
def notebook_image(real_node) -> str:
    """The portal's default notebook image (deploy/notebook/), built as `python -m devcluster
    image --notebook` builds it (its layers cached: seconds when nothing changed) and loaded
    onto the real node unless it holds it already; its name, for `imagePullPolicy: Never`."""
    missing = images.missing_tools()
    if missing:
        pytest.fail(
            f"not installed: {', '.join(missing)} (scripts/bootstrap.sh installs them)",
            pytrace=False,
        )
    name = images.build_notebook()
    real_node.ensure_image(name)
    return name


@pytest.fixture(scope="module")
def gpu_sharing(devcluster) -> Iterator[api.GpuSharing]:
    """The GPU sharing nodes beside the default ones, for this test module: `.mig_node`
    (14 x nvidia.com/mig-1g.10gb), `.shared_node` (8 x nvidia.com/gpu.shared), `.sharable_node`
    (2 x nvidia.com/gpu), `.wait_for_allocatable(node, resource, count, timeout)`,
    `.wait_for_label(node, label, value, timeout)`. The sharing manager and the DCGM simulator are
    (re)started first when their processes are older than their code (a long-running cluster)."""
    sources = {
        "sharing-manager": [sharing_manager_module.__file__, gpu_sharing_module.__file__],
        "dcgm-simulator": [
            dcgm_simulator_module.__file__,
            dcgm_metrics_module.__file__,
            gpu_sharing_module.__file__,
        ],
    }
    for name, files in sources.items():
        if cluster.restart_if_older_than_code(devcluster.settings, name, [Path(f) for f in files]):
            progress(f"(re)started {name}: its code changed since it started")
    sharing = api.GpuSharing(devcluster.settings)
    sharing.add()
    try:
        yield sharing
    finally:
        sharing.remove()


def _session_cluster(settings: Settings) -> Iterator[api.DevCluster]:
    # Announce this session before starting, so that a session finishing meanwhile does not
    # stop the cluster under it.
    lease = _sessions_dir(settings) / str(os.getpid())
    lease.parent.mkdir(parents=True, exist_ok=True)
    lease.touch()
    try:
        handle = api.up(fresh=True, instance=settings.instance)
        flag = handle.settings.state_dir / STARTED_BY_PYTEST_FLAG
        if handle.started_here:
            flag.touch()
        yield handle
    finally:
        lease.unlink(missing_ok=True)
        keep = os.environ.get("DEVCLUSTER_KEEP", "") not in ("", "0")
        with cluster.state_lock(settings):
            started_by_a_test_session = (settings.state_dir / STARTED_BY_PYTEST_FLAG).exists()
            if started_by_a_test_session and not keep and not _other_live_sessions(settings):
                progress(f"stopping the devcluster a test session started ({settings.state_dir})")
                cluster.down_locked(cluster.current(settings.instance))
