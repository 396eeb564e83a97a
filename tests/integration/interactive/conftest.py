"""Session tests: the GPU job tests' devcluster, worker, watcher and Kueue fixtures."""

from tests.integration.gpujobs.fixtures import (  # noqa: F401 (fixtures)
    gpu_cluster,
    make_gpu_team,
    portal_kubeconfig,
    running_services,
    watcher_process,
)
from tests.integration.gpujobs.kueue import kueue_cluster, make_kueue_team  # noqa: F401
