"""The Helm chart's values table (deploy/helm/gpu-portal/README.md, and the same table in the
docs' "Deploying with Helm", docs/deploying/helm.md) names every value values.yaml has, and no
other."""

import re
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "deploy" / "helm" / "gpu-portal"
# Documented as one value, whatever keys they hold.
WHOLE = {
    "resources",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "podSecurityContext",
    "securityContext",
}
# Each component's placement, documented once for all of them.
PLACEMENT = {"podAnnotations", "nodeSelector", "tolerations", "affinity"}
COMPONENTS = {"web", "worker", "webhookWorker", "beat", "watcher"}


def value_paths(values: dict, prefix: str = "") -> set[str]:
    paths = set()
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and key not in WHOLE and prefix.count(".") < 2:
            paths |= value_paths(value, f"{path}.")
        else:
            paths.add(path)
    return paths


def table(text: str) -> str:
    match = re.search(r"^\| Value \| Default \| What it is \|\n(?:\|.*\n)+", text, re.M)
    assert match, "no values table"
    return match[0]


def documented(text: str) -> set[str]:
    names = set()
    for row in table(text).splitlines()[2:]:
        names |= set(re.findall(r"`([A-Za-z<>.]+)`", row.split("|")[1]))
    return names


def test_the_chart_readme_documents_every_value():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    rows = documented((CHART / "README.md").read_text())
    expected = {
        path
        for path in value_paths(values)
        if not (path.split(".")[0] in COMPONENTS and path.split(".")[-1] in PLACEMENT)
    }
    listed = {row for row in rows if not row.startswith("<component>") and not row.startswith(".")}

    assert expected - listed == set()
    assert listed - expected == set()
    assert {"<component>.podAnnotations", "nodeSelector", "tolerations", "affinity"} <= rows


def test_the_readme_has_the_same_table():
    chart_readme = (CHART / "README.md").read_text()
    readme = (REPO_ROOT / "docs" / "deploying" / "helm.md").read_text()

    assert table(readme) == table(chart_readme)
    assert "helm install portal deploy/helm/gpu-portal" in readme
