from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = "Budgets and chargeback"

    def ready(self) -> None:
        # The tasks are registered in every process: the app sends them by name.
        import billing.tasks  # noqa: F401
        from billing.usage_budgets import usage_budget_figures
        from monitoring import usage_budgets

        usage_budgets.register(usage_budget_figures)
