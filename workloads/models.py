"""What a team's leads allow each member at once: ``MemberLimit``."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from clusters.models import Cluster
from tenants.models import Team

# The columns' range (PostgreSQL's integer): a larger figure would be a database error.
MAX_LIMIT = 2**31 - 1


class MemberLimit(models.Model):
    """What one member of a team may hold at once on one cluster, set by the team's leads: GPUs
    (of any kind, whole or slices alike) and running workloads (jobs and sessions). An empty
    figure is no limit. Within the team's quota: a member under their limit can still wait for
    the team's."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="member_limits")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="member_limits"
    )
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="member_limits")
    max_gpus = models.PositiveIntegerField(
        null=True, blank=True, help_text="GPUs the member's jobs and sessions may hold at once."
    )
    max_running = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Jobs and sessions the member may have unfinished at once.",
    )
    set_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team", "user", "cluster"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "user", "cluster"], name="member_limit_team_user_cluster_unique"
            ),
            models.CheckConstraint(
                condition=Q(max_gpus__isnull=False) | Q(max_running__isnull=False),
                name="member_limit_limits_something",
            ),
        ]

    def __str__(self) -> str:
        return f"limit of {self.user} in {self.team} on {self.cluster}"
