"""What a team did with its past grants, beside each request an admin reviews and on a lead's
renewal form: GPU-hours granted, held and used over the last 30 and 90 days, utilisation while
held, how often its jobs waited, and a suggested size with its arithmetic.

Tenants defines the figures and asks for them; reading them needs Prometheus (``monitoring``)
and the jobs (``gpujobs``), which sit above tenants, so the app that can read them provides
them at start-up (``register``) rather than tenants importing it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.ratios import percent_of

# The windows each request is shown against, in days, shortest first.
WINDOWS_DAYS = (30, 90)


@dataclass(frozen=True)
class Ask:
    """What a history is read for: a team asking for GPUs of a kind (and model) on a cluster."""

    team_id: int
    cluster_id: int
    gpu_resource: str
    gpu_model: str
    gpus: int


@dataclass(frozen=True)
class UseWindow:
    """One window's figures. Hours are GPU equivalents (a MIG slice or a shared GPU's replica
    as its share of a GPU). Granted hours count the grants of the asked kind (and model);
    held and used hours are the team's on the cluster, of any GPU (Prometheus measures them
    per namespace); None when Prometheus did not answer."""

    days: int
    granted_gpu_hours: float
    hours_in_force: float  # hours of the window in which any such grant was in force
    held_gpu_hours: float | None
    used_gpu_hours: float | None
    jobs: int  # jobs of the asked kind (and model) created in the window
    jobs_waited: int  # of them, those that waited longer than ``waited_minutes`` to start
    waited_minutes: int

    @property
    def utilisation_percent(self) -> float | None:
        """Used of held: how busy the GPUs it held were."""
        return percent_of(self.used_gpu_hours, self.held_gpu_hours)

    @property
    def held_percent(self) -> float | None:
        """Held of granted: how much of what it was granted it held."""
        return percent_of(self.held_gpu_hours, self.granted_gpu_hours)


@dataclass(frozen=True)
class Suggestion:
    gpus: int
    arithmetic: str  # how it was reached, in words and numbers


@dataclass(frozen=True)
class GrantHistory:
    windows: tuple[UseWindow, ...]
    suggestion: Suggestion
    error: str = ""  # why held and used hours are missing, when they are


Provider = Callable[[Sequence[Ask]], list[GrantHistory]]

_provider: Provider | None = None


def register(provider: Provider) -> None:
    """Called once at start-up by the app that reads use (``gpujobs.grant_history``)."""
    global _provider
    _provider = provider


def histories(asks: Sequence[Ask]) -> list[GrantHistory | None]:
    """Each ask's history, in order; Nones where no app provides them."""
    if _provider is None or not asks:
        return [None] * len(asks)
    return list(_provider(asks))


def ask_of(quota_request) -> Ask:
    """The ask of a quota request (saved or not), or of a grant to extend."""
    return Ask(
        team_id=quota_request.team_id,
        cluster_id=quota_request.cluster_id,
        gpu_resource=quota_request.gpu_resource,
        gpu_model=quota_request.gpu_model,
        gpus=quota_request.gpus,
    )
