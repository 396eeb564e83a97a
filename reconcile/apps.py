from django.apps import AppConfig


class ReconcileConfig(AppConfig):
    """What reaches the clusters: the manifests of team namespaces (quota, limits, RBAC, network
    and Kueue objects), the clusters' admission policies, and the passes that keep them true.
    Who holds what (teams, members, grants) is ``tenants``; this app turns it into objects."""

    name = "reconcile"

    def ready(self) -> None:
        # The tasks are registered in every process: tenants sends them by name.
        import reconcile.tasks  # noqa: F401
