from django.apps import AppConfig


class TenantsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "tenants"

    def ready(self) -> None:
        from clusters.signals import capacity_changed, settings_changed
        from tenants.reconcile_triggers import on_capacity_changed
        from tenants.services import on_cluster_settings_changed

        capacity_changed.connect(on_capacity_changed, dispatch_uid="tenants-capacity-changed")
        settings_changed.connect(
            on_cluster_settings_changed, dispatch_uid="tenants-cluster-settings-changed"
        )
