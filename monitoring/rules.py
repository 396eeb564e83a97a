"""Prometheus alert rules for idle GPUs, for teams that prefer Alertmanager to the portal's own
notifications: the seed's ``LowGPUUsage`` rule, per pod, with the cluster's threshold, window,
metric and label layout. The cluster-wide file also carries the portal's recording rules
(``promql.recording_rules``): loaded into the cluster's Prometheus, they keep the cluster page's
long windows fast, and the portal uses them as soon as they cover a window.

The builders are pure functions returning plain dicts, and YAML text. The export the pages
serve, ``alert_rules_yaml`` at the end, is the one part that reads Django: the cluster row's
idle settings and the portal's name, which it hands to the builders.
"""

from __future__ import annotations

import yaml
from django.conf import settings
from django.core.exceptions import ValidationError

from clusters.models import Cluster
from clusters.vocabulary import MANAGED_BY_LABEL
from monitoring import promql
from monitoring.metrics import metrics_config
from tenants.models import Team

ALERT_NAME = "LowGPUUsage"


def low_gpu_usage_rule(
    config: promql.MetricsConfig,
    *,
    threshold_percent: float,
    window_minutes: int,
    namespace: str | None = None,
) -> dict:
    """One alerting rule: pods whose GPUs averaged under the threshold over the window, for as
    long again (the seed's ``for: 5m``)."""
    labels = config.labels
    rule_labels = {"severity": "warning"}
    if namespace is not None:
        rule_labels["team"] = namespace
    pod = f"{{{{ $labels.{labels.namespace} }}}}/{{{{ $labels.{labels.pod} }}}}"
    return {
        "alert": ALERT_NAME,
        "expr": promql.idle_rule_expression(
            config,
            threshold_percent=threshold_percent,
            window_minutes=window_minutes,
            namespace=namespace,
        ),
        "for": f"{window_minutes}m",
        "labels": rule_labels,
        "annotations": {
            "summary": f"GPU usage low for {pod}",
            "description": (
                f'The GPUs of pod {pod} averaged {{{{ $value | printf "%.1f" }}}}% utilisation '
                f"over {window_minutes} minutes (threshold {threshold_percent:g}%)."
            ),
        },
    }


def rule_group(name: str, *rules: dict) -> dict:
    return {"name": name, "rules": list(rules)}


def recording_rule_group(name: str, config: promql.MetricsConfig) -> dict:
    """The portal's recording rules, evaluated at Prometheus' own evaluation interval (which
    must stay under its 5-minute lookback, as the default 1 minute does)."""
    return rule_group(name, *promql.recording_rules(config))


def rules_file(*groups: dict) -> dict:
    """A plain Prometheus rules file (``rule_files:`` in prometheus.yml)."""
    return {"groups": list(groups)}


def prometheus_rule(*groups: dict, name: str, namespace: str, managed_by: str) -> dict:
    """The same groups as a Prometheus Operator ``PrometheusRule`` object."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {MANAGED_BY_LABEL: managed_by},
        },
        "spec": {"groups": list(groups)},
    }


def to_yaml(document: dict) -> str:
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False, width=120)


# The export: the builders above, filled in from a cluster and a team.

RULE_FORMATS = ("rules", "prometheusrule")


def alert_rules_yaml(*, cluster: Cluster, team: Team | None, format: str) -> str:
    """The LowGPUUsage rule with the cluster's threshold, window, metric and labels, for one
    team's namespace (or every pod holding GPUs when ``team`` is None), as a plain rules file
    or a PrometheusRule object. The cluster-wide file adds the recording rules, once per
    Prometheus (a team's file loaded beside it would otherwise record every series twice)."""
    if format not in RULE_FORMATS:
        raise ValidationError({"format": f"Choose one of {', '.join(RULE_FORMATS)}."})
    namespace = team.slug if team is not None else None
    config = metrics_config(cluster)
    rule = low_gpu_usage_rule(
        config,
        threshold_percent=cluster.idle_utilization_percent,
        window_minutes=cluster.idle_window_minutes,
        namespace=namespace,
    )
    name = f"{settings.PORTAL_NAME}-idle-gpus" + (f"-{team.slug}" if team else "")
    groups = [rule_group(name, rule)]
    if team is None:
        groups.append(recording_rule_group(f"{settings.PORTAL_NAME}-recording", config))
    if format == "rules":
        return to_yaml(rules_file(*groups))
    return to_yaml(
        prometheus_rule(
            *groups,
            name=name,
            namespace=namespace or "monitoring",
            managed_by=settings.PORTAL_NAME,
        )
    )
