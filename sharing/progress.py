"""Where a node is in a layout's change, and the words the pages and the API show for it.
Pure: over ``clusters.node_sharing.NodeSharing`` readings."""

from __future__ import annotations

from dataclasses import dataclass

from clusters.node_sharing import NodeSharing
from clusters.vocabulary import (
    DEFAULT_GPU_RESOURCE,
    DEVICE_PLUGIN_CONFIG_LABEL,
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    MIG_STATE_FAILED,
    MIG_STATE_SUCCESS,
)
from sharing.layouts import MIG
from sharing.placement import Pick


@dataclass(frozen=True)
class NodeStep:
    """One node's reading: ``done`` (it offers what was asked), ``failed`` (the operator said
    so) or neither (still waiting), and ``text``: what it shows, in words."""

    node: str
    done: bool
    failed: bool
    text: str


def operator_of(kind: str) -> str:
    return "the MIG manager" if kind == MIG else "the device plugin"


def label_of(kind: str) -> str:
    return MIG_CONFIG_LABEL if kind == MIG else DEVICE_PLUGIN_CONFIG_LABEL


def picked_text(pick: Pick, *, kind: str, label_value: str, resource: str, per_gpu: int) -> str:
    """What was picked and set, and whose the slices of GPUs beyond the ask are."""
    nodes = ", ".join(
        f"{name} ({gpus} GPU{'s' if gpus != 1 else ''})" for name, gpus in pick.nodes.items()
    )
    text = (
        f"Picked {nodes}; cordoned and labelled {label_of(kind)}={label_value}. Waiting for "
        f"{operator_of(kind)}."
    )
    if pick.extra:
        text += (
            f" The picked nodes hold {pick.extra} GPU{'s' if pick.extra != 1 else ''} beyond the "
            f"{pick.asked} asked: they become {pick.extra * per_gpu} × {resource} too, which are "
            "not the team's (they count in the cluster's capacity)."
        )
    return text


def _shown(node: NodeSharing, resource: str) -> str:
    shown = ", ".join(f"{count} × {name}" for name, count in sorted(node.allocatable.items()))
    return shown or f"no {resource}"


def applying_step(node: NodeSharing, *, kind: str, resource: str, expected: int) -> NodeStep:
    """Whether the node offers the ``expected`` slices of ``resource`` and no whole GPU (for MIG
    also ``mig.config.state=success``), or the MIG manager failed."""
    offers = node.allocatable.get(resource, 0)
    whole_left = node.allocatable.get(DEFAULT_GPU_RESOURCE, 0)
    if kind == MIG and node.mig_state == MIG_STATE_FAILED:
        return NodeStep(
            node.name,
            done=False,
            failed=True,
            text=(
                f"The MIG manager on {node.name} reported {MIG_CONFIG_STATE_LABEL}=failed: its "
                "GPUs were not repartitioned."
            ),
        )
    state_ok = kind != MIG or node.mig_state == MIG_STATE_SUCCESS
    if state_ok and offers >= expected and whole_left == 0:
        return NodeStep(
            node.name, done=True, failed=False, text=f"{node.name} offers {offers} × {resource}."
        )
    state = f" {MIG_CONFIG_STATE_LABEL}={node.mig_state or 'not set'};" if kind == MIG else ""
    return NodeStep(
        node.name,
        done=False,
        failed=False,
        text=(
            f"Waiting for {operator_of(kind)} on {node.name}:{state} it offers "
            f"{_shown(node, resource)}, {expected} × {resource} expected."
        ),
    )


def reverting_step(node: NodeSharing, *, kind: str, gpus: int) -> NodeStep:
    """Whether the node offers its ``gpus`` whole GPUs again and nothing shared."""
    whole = node.allocatable.get(DEFAULT_GPU_RESOURCE, 0)
    sliced = sum(count for name, count in node.allocatable.items() if name != DEFAULT_GPU_RESOURCE)
    if kind == MIG and node.mig_state == MIG_STATE_FAILED:
        return NodeStep(
            node.name,
            done=False,
            failed=True,
            text=(
                f"The MIG manager on {node.name} reported {MIG_CONFIG_STATE_LABEL}=failed while "
                "turning its GPUs whole again."
            ),
        )
    state_ok = kind != MIG or node.mig_state in ("", MIG_STATE_SUCCESS)
    if state_ok and whole >= gpus and sliced == 0:
        return NodeStep(
            node.name, done=True, failed=False, text=f"{node.name} offers {whole} whole GPUs again."
        )
    state = f" {MIG_CONFIG_STATE_LABEL}={node.mig_state or 'not set'};" if kind == MIG else ""
    return NodeStep(
        node.name,
        done=False,
        failed=False,
        text=(
            f"Waiting for {operator_of(kind)} on {node.name} to make its GPUs whole again:"
            f"{state} it offers {_shown(node, DEFAULT_GPU_RESOURCE)}, {gpus} × "
            f"{DEFAULT_GPU_RESOURCE} expected."
        ),
    )


def timed_out_text(waiting: str, *, seconds: int) -> str:
    return f"Gave up after {seconds} s. {waiting}"
