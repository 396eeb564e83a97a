from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "webhooks"

    def ready(self) -> None:
        # The tasks are registered in every process: the app sends them by name.
        import webhooks.tasks  # noqa: F401
        from tenants.events import event_emitted
        from webhooks.services import on_event_emitted

        event_emitted.connect(on_event_emitted, dispatch_uid="webhooks-event-emitted")
