from django.apps import AppConfig


class InteractiveConfig(AppConfig):
    """Interactive sessions (notebooks). Not named ``sessions``: that label is Django's own
    (``django.contrib.sessions``)."""

    name = "interactive"
    verbose_name = "Interactive sessions"

    def ready(self) -> None:
        import interactive.tasks  # noqa: F401  (registered in every process, sent by name)
        from clusters import pods
        from clusters.vocabulary import SESSION_ID_LABEL
        from interactive import culling, selectors
        from workloads import holdings, member_limits

        # A team's running sessions count against its quota like its jobs.
        holdings.register("its sessions", selectors.gpus_held_by_sessions)
        # And a member's against the limit the team's leads set them.
        member_limits.register("sessions", selectors.member_sessions_use)
        # The team's idle-pod policy stops a session through the portal (the volume is kept).
        pods.register_stopper(
            label=SESSION_ID_LABEL, kind="InteractiveSession", stop=culling.stop_idle_pod
        )
