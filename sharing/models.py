"""Sharing layouts: a team's whole GPUs turned into MIG slices or shared GPUs for a while."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from clusters.models import Cluster
from sharing.layouts import slice_resource
from tenants.models import QuotaGrant, Team


class LayoutRequest(models.Model):
    """A lead's ask to turn ``gpus`` whole GPUs of one of the team's grants (``source_grant``,
    ``nvidia.com/gpu`` of one model) into MIG slices of ``mig_profile`` or ``replicas`` shared
    GPUs each, until ``ends_on``; an admin's decision on it; and how far the cluster followed.

    The cluster is changed a whole node at a time: the portal picks nodes of the model that run
    no GPU pod (``nodes``), cordons them, sets the GPU Operator's label and waits for the new
    allocatable (``progress`` says what it waits for), then uncordons them.

    How the grants change, so that the revert gives back exactly what was given up:

    * applied: the source grant gives up ``gpus``: it is shrunk by that many, or, when they are
      all of it, ended (revoked, with a note naming the layout; ``source_ended``). In the same
      transaction an auto-approved request (its justification names the layout) grants the
      slices: ``gpus`` x slices per GPU of the slice resource, for the layout's model, until
      ``ends_on`` (``slice_grant``). The slices of a picked node's other GPUs are the cluster's,
      not the team's.
    * reverted (after ``ends_on``, the nodes whole again): the slice grant ends, and an
      auto-approved request grants ``gpus`` whole GPUs of the model again from the day of the
      revert until the source grant's end (``returned_grant``), but only while the source grant
      would still hold them: it is active (shrunk) or the layout ended it, and its end has not
      passed. A source grant an admin revoked meanwhile, or one whose period is over, gets
      nothing back: the revert never gives more than the source would hold now.
    * failed (the operator reported failed, or the deadline passed): the node labels are put
      back as they were (``restore``) and the grants are not touched.
    """

    class Kind(models.TextChoices):
        MIG = "mig", "MIG slices"
        SHARED = "shared", "Shared GPUs (time-slicing)"

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        REJECTED = "rejected", "Rejected"
        CANCELLED = "cancelled", "Cancelled"
        APPROVED = "approved", "Approved"
        APPLYING = "applying", "Applying"
        APPLIED = "applied", "Applied"
        FAILED = "failed", "Failed"
        REVERTING = "reverting", "Reverting"
        REVERTED = "reverted", "Reverted"

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="layout_requests")
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="layout_requests")
    source_grant = models.ForeignKey(
        QuotaGrant, on_delete=models.PROTECT, related_name="layout_requests"
    )
    gpu_model = models.CharField(max_length=200, help_text="The source grant's GPU model.")
    gpus = models.PositiveIntegerField(help_text="Whole GPUs of the source grant to convert.")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    mig_profile = models.CharField(max_length=20, blank=True, help_text='MIG only: "1g.10gb".')
    replicas = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Shared only: replicas per GPU (2, 4 or 8)."
    )
    slices = models.PositiveIntegerField(help_text="Slices (or replicas) the team is granted.")
    ends_on = models.DateField(help_text="The last day; the layout is reverted after it.")
    justification = models.TextField()
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="layout_requests"
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="layout_decisions",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.TextField(blank=True)
    nodes = models.JSONField(default=list, blank=True, help_text="The nodes picked, by name.")
    node_gpus = models.JSONField(
        default=dict, blank=True, help_text="Whole GPUs of each picked node before the change."
    )
    restore = models.JSONField(
        default=dict,
        blank=True,
        help_text="Each picked node's sharing labels and cordon as they were, to put back.",
    )
    progress = models.TextField(blank=True, help_text="What the portal does or waits for now.")
    error = models.TextField(blank=True, help_text="Why it failed, or why a revert is retried.")
    deadline_at = models.DateTimeField(null=True, blank=True)
    slice_grant = models.OneToOneField(
        QuotaGrant,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="slice_layout",
    )
    source_ended = models.BooleanField(
        default=False, help_text="The layout ended the source grant (all of it was converted)."
    )
    returned_grant = models.OneToOneField(
        QuotaGrant,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="returned_by_layout",
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    applied_at = models.DateTimeField(null=True, blank=True)
    reverted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["state", "ends_on"], name="layout_state_end_idx")]
        constraints = [
            models.CheckConstraint(condition=Q(gpus__gte=1), name="layout_gpus_positive"),
            models.CheckConstraint(condition=Q(slices__gte=1), name="layout_slices_positive"),
            models.CheckConstraint(
                condition=Q(kind="mig", replicas__isnull=True) & ~Q(mig_profile="")
                | Q(kind="shared", mig_profile="", replicas__in=[2, 4, 8]),
                name="layout_kind_fields",
            ),
            models.CheckConstraint(
                condition=Q(
                    state__in=[
                        "pending",
                        "rejected",
                        "cancelled",
                        "approved",
                        "applying",
                        "applied",
                        "failed",
                        "reverting",
                        "reverted",
                    ]
                ),
                name="layout_state_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"layout #{self.pk} {self.team}: {self.gpus} × {self.gpu_model} → {self.describe}"

    @property
    def slice_resource(self) -> str:
        return slice_resource(self.kind, self.mig_profile)

    @property
    def describe(self) -> str:
        """``14 x nvidia.com/mig-1g.10gb``."""
        return f"{self.slices} × {self.slice_resource}"
