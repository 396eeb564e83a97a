"""Prometheus alert rules for idle GPUs, for teams that prefer Alertmanager to the portal's own
notifications: the seed's ``LowGPUUsage`` rule, per pod, with the cluster's threshold, window,
metric and label layout. Pure functions returning plain dicts, and YAML text."""

from __future__ import annotations

import yaml

from monitoring import promql

ALERT_NAME = "LowGPUUsage"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"


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


def rule_group(name: str, rule: dict) -> dict:
    return {"name": name, "rules": [rule]}


def rules_file(group: dict) -> dict:
    """A plain Prometheus rules file (``rule_files:`` in prometheus.yml)."""
    return {"groups": [group]}


def prometheus_rule(group: dict, *, name: str, namespace: str, managed_by: str) -> dict:
    """The same group as a Prometheus Operator ``PrometheusRule`` object."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {MANAGED_BY_LABEL: managed_by},
        },
        "spec": {"groups": [group]},
    }


def to_yaml(document: dict) -> str:
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False, width=120)
