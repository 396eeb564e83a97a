"""GPU job tests: see ``fixtures.py`` for the devcluster, worker and watcher fixtures."""

from tests.integration.gpujobs.fixtures import (  # noqa: F401 (fixtures)
    gpu_cluster,
    make_gpu_team,
    portal_kubeconfig,
    running_job,
    running_services,
    watcher_process,
)
