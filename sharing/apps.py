from django.apps import AppConfig


class SharingConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "sharing"
    verbose_name = "GPU sharing layouts"

    def ready(self) -> None:
        # The tasks are registered in every process: services send them by name.
        import sharing.tasks  # noqa: F401
