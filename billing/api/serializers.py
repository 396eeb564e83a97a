"""What the billing API sends. Writes go to ``billing.prices`` and ``billing.budgets``, which
validate (naming each bad field); these only shape the answers."""

from rest_framework import serializers

from billing.models import Budget, Price
from billing.pricing import money


class PriceSerializer(serializers.ModelSerializer):
    class Meta:
        model = Price
        fields = [
            "id",
            "gpu_model",
            "gpu_hour",
            "cpu_core_hour",
            "memory_gib_hour",
            "effective_from",
        ]
        read_only_fields = fields


class PriceWriteSerializer(serializers.Serializer):
    """Documents the request; values go to ``price_set`` as sent, which checks them."""

    gpu_model = serializers.CharField(required=False, allow_blank=True)
    effective_from = serializers.CharField(help_text="A month's first day, YYYY-MM-01.")
    gpu_hour = serializers.CharField(help_text="Not negative, at most 4 decimal places.")
    cpu_core_hour = serializers.CharField(required=False)
    memory_gib_hour = serializers.CharField(required=False)


class BudgetSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    department = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    period_start = serializers.SerializerMethodField()
    spent_gpu_hours = serializers.SerializerMethodField()
    spent_percent = serializers.SerializerMethodField()
    checked_at = serializers.SerializerMethodField()
    exhausted = serializers.SerializerMethodField()

    class Meta:
        model = Budget
        fields = [
            "id", "team", "department", "period", "gpu_model", "gpu_hours", "policy",
            "period_start", "spent_gpu_hours", "spent_percent", "checked_at", "exhausted",
        ]  # fmt: skip
        read_only_fields = fields

    def _spend(self, budget):
        return self.context.get("spends", {}).get(budget.pk)

    def get_period_start(self, budget) -> str | None:
        spend = self._spend(budget)
        return spend.period_start.isoformat() if spend else None

    def get_spent_gpu_hours(self, budget) -> float | None:
        spend = self._spend(budget)
        return round(spend.spent_gpu_hours, 3) if spend else None

    def get_spent_percent(self, budget) -> float | None:
        spend = self._spend(budget)
        if spend is None or not budget.gpu_hours:
            return None
        return round(100 * spend.spent_gpu_hours / float(budget.gpu_hours), 1)

    def get_checked_at(self, budget) -> str | None:
        spend = self._spend(budget)
        return spend.checked_at.isoformat() if spend else None

    def get_exhausted(self, budget) -> bool:
        spend = self._spend(budget)
        return bool(spend and spend.exhausted_at)


class BudgetWriteSerializer(serializers.Serializer):
    """Documents the request; values go to ``budget_set`` as sent, which checks them."""

    team = serializers.CharField(required=False, help_text="A team's slug (or a department).")
    department = serializers.CharField(required=False, help_text="A department's slug.")
    period = serializers.ChoiceField(choices=Budget.Period.choices, required=False)
    gpu_model = serializers.CharField(required=False, allow_blank=True)
    gpu_hours = serializers.CharField(help_text="Not negative, at most 4 decimal places.")
    policy = serializers.ChoiceField(choices=Budget.Policy.choices, required=False)


def costing_data(costing) -> dict:
    def hours(value):
        return None if value is None else round(value, 3)

    return {
        "granted_gpu_hours": hours(costing.granted_gpu_hours),
        "reserved_gpu_hours": hours(costing.reserved_gpu_hours),
        "held_gpu_hours": hours(costing.held_gpu_hours),
        "held_gpu_equivalent_hours": hours(costing.held_gpu_equivalent_hours),
        "used_gpu_hours": hours(costing.used_gpu_hours),
        "idle_gpu_hours": hours(costing.idle_gpu_hours),
        "idle_share_percent": hours(costing.idle_share_percent),
        "reserved_cost": str(money(costing.reserved_cost)),
        "used_cost": str(money(costing.used_cost)),
        "idle_cost": str(money(costing.idle_cost)),
    }


def statement_data(statement, *, departments: bool) -> dict:
    return {
        "months": [m.strftime("%Y-%m") for m in statement.months],
        "teams": [
            {
                "team": line.team_slug,
                "department": line.department_slug or None,
                "cluster": line.cluster,
                "month": line.month.strftime("%Y-%m"),
                **costing_data(line.costing),
            }
            for line in statement.lines
        ],
        "departments": [
            {
                "department": line.department_slug,
                "month": line.month.strftime("%Y-%m"),
                **costing_data(line.costing),
            }
            for line in statement.departments
        ]
        if departments
        else [],
        "errors": statement.errors,
    }
