from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q

from tenants.models import Department, Team

# Prices and budgets: at most 4 decimal places (the rule), never negative.
PRICE_DIGITS = 14
PRICE_DECIMALS = 4
BUDGET_DIGITS = 12
BUDGET_DECIMALS = 4


def _money(**kwargs) -> models.DecimalField:
    return models.DecimalField(
        max_digits=PRICE_DIGITS,
        decimal_places=PRICE_DECIMALS,
        validators=[MinValueValidator(0)],
        **kwargs,
    )


class Price(models.Model):
    """What one GPU-hour of a GPU model costs (and one CPU core-hour and one GiB-hour of memory
    with it) from a month's first day on, until a later row of the same model. An empty model
    prices every model without a row of its own. Rows stay: the history prices past months."""

    gpu_model = models.CharField(
        max_length=200,
        blank=True,
        help_text="The GPU model (the cluster's GPU model label value); empty: every other model.",
    )
    gpu_hour = _money(help_text="Price of one GPU-hour (a MIG slice costs its share).")
    cpu_core_hour = _money(default=0)
    memory_gib_hour = _money(default=0)
    effective_from = models.DateField(help_text="The first day of the month it applies from.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["gpu_model", "-effective_from"]
        constraints = [
            models.UniqueConstraint(
                fields=["gpu_model", "effective_from"], name="price_model_month_unique"
            ),
            models.CheckConstraint(
                condition=Q(gpu_hour__gte=0, cpu_core_hour__gte=0, memory_gib_hour__gte=0),
                name="price_not_negative",
            ),
            models.CheckConstraint(
                condition=Q(effective_from__day=1), name="price_effective_from_month_start"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.gpu_model or 'any model'} from {self.effective_from}: {self.gpu_hour}/GPU-h"


class Budget(models.Model):
    """GPU-hours a team, or a department (its teams and nested departments' teams together),
    may hold per calendar month or quarter, of one GPU model or of all; and what happens to new
    work once they are spent."""

    class Period(models.TextChoices):
        MONTH = "month", "Month"
        QUARTER = "quarter", "Quarter"

    class Policy(models.TextChoices):
        REFUSE = "refuse", "Refuse new work"
        OPPORTUNISTIC = "opportunistic", "Accept only opportunistic work (Kueue)"

    team = models.ForeignKey(
        Team, on_delete=models.CASCADE, null=True, blank=True, related_name="budgets"
    )
    department = models.ForeignKey(
        Department, on_delete=models.CASCADE, null=True, blank=True, related_name="budgets"
    )
    period = models.CharField(max_length=10, choices=Period.choices, default=Period.MONTH)
    gpu_model = models.CharField(
        max_length=200, blank=True, help_text="Only GPU-hours of this model; empty: every model."
    )
    gpu_hours = models.DecimalField(
        max_digits=BUDGET_DIGITS,
        decimal_places=BUDGET_DECIMALS,
        validators=[MinValueValidator(0)],
    )
    policy = models.CharField(max_length=15, choices=Policy.choices, default=Policy.REFUSE)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(team__isnull=True, department__isnull=False)
                | Q(team__isnull=False, department__isnull=True),
                name="budget_one_owner",
            ),
            models.UniqueConstraint(
                fields=["team", "period", "gpu_model"],
                condition=Q(team__isnull=False),
                name="budget_team_period_model_unique",
            ),
            models.UniqueConstraint(
                fields=["department", "period", "gpu_model"],
                condition=Q(department__isnull=False),
                name="budget_department_period_model_unique",
            ),
            models.CheckConstraint(condition=Q(gpu_hours__gte=0), name="budget_not_negative"),
            models.CheckConstraint(
                condition=Q(period__in=["month", "quarter"]), name="budget_period_valid"
            ),
            models.CheckConstraint(
                condition=Q(policy__in=["refuse", "opportunistic"]), name="budget_policy_valid"
            ),
        ]

    def __str__(self) -> str:
        owner = f"team {self.team.slug}" if self.team_id else f"department {self.department.slug}"
        model = f" of {self.gpu_model}" if self.gpu_model else ""
        return f"{owner}: {self.gpu_hours} GPU-hours{model} per {self.period}"


class BudgetSpend(models.Model):
    """One budget in one period (from its first day): the GPU-hours held so far as the last
    budget check measured them, and when the leads were told of 80% and of 100%, so that each
    is said once. Submission reads ``exhausted_at``: no Prometheus query on the way in."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="spends")
    period_start = models.DateField()
    spent_gpu_hours = models.FloatField(default=0)
    checked_at = models.DateTimeField()
    warned_at = models.DateTimeField(null=True, blank=True)
    exhausted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["budget", "-period_start"]
        constraints = [
            models.UniqueConstraint(
                fields=["budget", "period_start"], name="budget_spend_period_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.budget}: {self.spent_gpu_hours:.1f} spent from {self.period_start}"
