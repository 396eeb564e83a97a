"""The LowGPUUsage alert rule as a rules file and as a PrometheusRule."""

import yaml

from monitoring import promql, rules


def rule(**kwargs):
    config = kwargs.pop("config", promql.MetricsConfig())
    return rules.low_gpu_usage_rule(config, threshold_percent=10, window_minutes=5, **kwargs)


def test_the_rule_is_the_seeds_low_gpu_usage_per_pod_with_its_for_clause():
    low = rule(namespace="vision")
    assert low["alert"] == "LowGPUUsage"
    assert low["expr"].endswith("< 10")
    assert 'namespace="vision"' in low["expr"]
    assert low["for"] == "5m"
    assert low["labels"] == {"severity": "warning", "team": "vision"}


def test_the_cluster_wide_rule_covers_every_pod_holding_gpus():
    low = rule()
    assert 'namespace!=""' in low["expr"]
    assert "team" not in low["labels"]


def test_annotations_name_the_pod_in_the_clusters_label_layout():
    low = rule(config=promql.MetricsConfig(layout=promql.LAYOUT_EXPORTED))
    assert "$labels.exported_namespace" in low["annotations"]["summary"]
    assert "$labels.exported_pod" in low["annotations"]["summary"]


def test_rules_file_and_prometheus_rule_carry_the_same_group():
    group = rules.rule_group("gpu-portal-idle-gpus", rule())
    plain = yaml.safe_load(rules.to_yaml(rules.rules_file(group)))
    manifest = yaml.safe_load(
        rules.to_yaml(
            rules.prometheus_rule(group, name="idle", namespace="monitoring", managed_by="gp")
        )
    )
    assert plain == {"groups": [group]}
    assert manifest["apiVersion"] == "monitoring.coreos.com/v1"
    assert manifest["kind"] == "PrometheusRule"
    assert manifest["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gp"}
    assert manifest["spec"]["groups"] == [group]
