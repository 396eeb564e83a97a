"""Two devclusters under one portal: see ``two_clusters.py``."""

from tests.integration.gpujobs.fixtures import (  # noqa: F401 (fixtures)
    running_services,
    watcher_process,
)
from tests.integration.multicluster.two_clusters import (  # noqa: F401 (fixtures)
    admin_user,
    clusters,
    core_second,
    grant,
    k8s_second,
    make_team,
    portal_kubeconfigs,
)
