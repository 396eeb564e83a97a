from django.apps import AppConfig


class ServingConfig(AppConfig):
    name = "serving"
    verbose_name = "Inference services"

    def ready(self) -> None:
        # The tasks are registered in every process: the app sends them by name.
        import serving.tasks  # noqa: F401
        from clusters import pods
        from clusters.vocabulary import INFERENCE_SERVICE_KIND, SERVICE_ID_LABEL
        from serving import selectors, services
        from tenants import impact
        from workloads import holdings

        # A service's replicas count against the team's quota beside its jobs.
        holdings.register("its services", selectors.gpus_held_by_services)
        impact.register("service", selectors.services_for_impact)
        # The idle policy stops a service's replica by stopping the service.
        pods.register_stopper(
            label=SERVICE_ID_LABEL, kind=INFERENCE_SERVICE_KIND, stop=services.service_stop_idle
        )
