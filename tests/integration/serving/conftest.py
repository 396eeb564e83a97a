"""Service tests: the fast API and page tests need no service; the devcluster tests use the GPU
job tests' fixtures (the devcluster, the least-privilege portal identity, a real Celery worker and
the watcher process, teams whose quota the portal's own reconcile applies) and the ones in
``cluster.py``."""

from tests.integration.gpujobs.fixtures import (  # noqa: F401 (fixtures)
    gpu_cluster,
    make_gpu_team,
    portal_kubeconfig,
    running_services,
    watcher_process,
)
from tests.integration.serving.cluster import apps, custom, gateway_api  # noqa: F401 (fixtures)
