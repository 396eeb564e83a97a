from django.apps import AppConfig


class GpujobsConfig(AppConfig):
    name = "gpujobs"
    verbose_name = "GPU jobs"

    def ready(self) -> None:
        from gpujobs import selectors
        from tenants import impact

        # A grant change's impact preview lists the team's jobs.
        impact.register("job", selectors.jobs_for_impact)
