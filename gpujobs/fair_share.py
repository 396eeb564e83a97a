"""Who gets the next idle GPU, and why, in words a member can read: pure functions of the
borrowers of a cluster (``Borrower``), no database. ``gpujobs.fair_share_reads`` reads them.

Kueue offers an idle GPU to the head of each ClusterQueue and admits the one whose share after
admission is the lowest: the GPUs its opportunistic queue would then borrow, over the weight that
queue borrows with (the team's weight lowered by its decayed use, ``reconcile.fair_share``).
Level shares go to the older job, first come first served. So the borrowers waiting are ranked
here by (share after admitting their first waiting job, when that job was submitted).

All the teams' queues of a cluster are in one cohort tree (departments' cohorts under the
portal's root), through which idle GPUs are lent everywhere; the ranking takes every borrower of
the cluster, as the root's fair sharing does (a department's own cohort may first settle its
teams among themselves: a refinement not shown).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from decimal import Decimal

from reconcile import fair_share

ANOTHER_TEAM = "another team"


@dataclass(frozen=True)
class Borrower:
    """One team of a cluster as Kueue's fair sharing sees it. ``name`` is what the viewer may
    see (``ANOTHER_TEAM`` for a team the viewer may not know of)."""

    team_id: int
    name: str
    weight: Decimal
    borrowing_weight: Decimal
    decayed_use: int | None  # whole GPU-hours; None: usage decay off on the cluster
    borrowed: float = 0.0  # GPUs its running opportunistic jobs hold now
    waiting: int = 0  # its opportunistic jobs waiting
    first_waiting_at: datetime.datetime | None = None
    first_waiting_gpus: float = 0.0
    first_waiting_model: str = ""

    @property
    def share(self) -> float:
        return fair_share.share(self.borrowed, self.borrowing_weight)

    @property
    def share_after(self) -> float:
        """Its share once its first waiting job is admitted (what Kueue compares)."""
        return fair_share.share(self.borrowed + self.first_waiting_gpus, self.borrowing_weight)


def ranked(borrowers: list[Borrower]) -> list[Borrower]:
    """The borrowers with opportunistic jobs waiting, the next in line for an idle GPU first."""
    far = datetime.datetime.max.replace(tzinfo=datetime.UTC)
    return sorted(
        (b for b in borrowers if b.waiting),
        key=lambda b: (round(b.share_after, 6), b.first_waiting_at or far, b.team_id),
    )


def rank_of(team_id: int, borrowers: list[Borrower]) -> int | None:
    """The team's 1-based place in line (None: nothing of it waits)."""
    order = [b.team_id for b in ranked(borrowers)]
    return order.index(team_id) + 1 if team_id in order else None


def short_model(gpu_model: str) -> str:
    """``NVIDIA-A100-SXM4-80GB`` -> ``A100``; "" -> ``GPU``."""
    if not gpu_model:
        return "GPU"
    parts = [p for p in gpu_model.replace("_", "-").split("-") if p.upper() != "NVIDIA"]
    return parts[0] if parts else gpu_model


def _use(borrower: Borrower) -> str:
    if borrower.decayed_use is None:
        return f"{borrower.borrowed:g} GPUs borrowed now"
    return f"decayed use {borrower.decayed_use} GPU-h"


def _figures(borrower: Borrower) -> str:
    return (
        f"share after one more {borrower.share_after:.2f} = "
        f"{borrower.borrowed + borrower.first_waiting_gpus:g} GPUs / weight "
        f"{borrower.borrowing_weight}"
    )


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def next_gpu_sentence(team_id: int, borrowers: list[Borrower]) -> str:
    """One sentence on the next idle GPU for the team: whether it is next in line and why,
    else who is and by how much."""
    me = next(b for b in borrowers if b.team_id == team_id)
    line = ranked(borrowers)
    waiting = len(line)
    if not me.waiting:
        if not line:
            return f"{me.name} has no opportunistic job waiting, and no other team does either."
        first = line[0]
        return (
            f"{me.name} has no opportunistic job waiting; the next borrowed "
            f"{short_model(first.first_waiting_model)} goes to {first.name} ({_use(first)}, "
            f"{_figures(first)})."
        )
    model = short_model(me.first_waiting_model)
    place = line.index(me) + 1
    if waiting == 1:
        return f"{me.name} is next in line for a borrowed {model}: it is the only team waiting."
    if place == 1:
        others = line[1:]
        level = all(
            b.borrowed == me.borrowed
            and b.weight == me.weight
            and b.first_waiting_gpus == me.first_waiting_gpus
            for b in others
        )
        if round(me.share_after, 6) == round(others[0].share_after, 6):
            return (
                f"{me.name} is next in line for a borrowed {model}: its share after one more "
                f"({me.share_after:.2f}) ties with {others[0].name}'s, and its job waited longer."
            )
        if level and me.decayed_use is not None:
            return (
                f"{me.name} is next in line for a borrowed {model}: its decayed use "
                f"{me.decayed_use} GPU-h is the lowest of {waiting} waiting teams."
            )
        return (
            f"{me.name} is next in line for a borrowed {model}: its {_figures(me)} is the "
            f"lowest of {waiting} waiting teams ({_use(me)})."
        )
    first = line[0]
    if round(first.share_after, 6) == round(me.share_after, 6):
        why = "level shares, and its job has waited longer"
    elif first.decayed_use is not None and first.decayed_use < (me.decayed_use or 0):
        why = (
            f"its {_use(first)} is lower than {me.name}'s {me.decayed_use} GPU-h, "
            f"so it borrows with weight {first.borrowing_weight} against {me.borrowing_weight}"
        )
    else:
        why = f"its {_figures(first)} against {me.name}'s {me.share_after:.2f}"
    return (
        f"{me.name} is {_ordinal(place)} of {waiting} waiting teams for a borrowed {model}: "
        f"{first.name} goes first ({why})."
    )
