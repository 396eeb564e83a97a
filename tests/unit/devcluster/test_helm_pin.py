"""Helm, which the chart's tests run (tests/integration/deploy), is built from the Go module
pinned in gomodules/helm at the version versions.py names, under a stamp of its own: adding it or
moving its pin never rebuilds the cluster's binaries, nor theirs it."""

import re

import pytest

from devcluster import builder, versions


def test_the_go_module_pins_the_version_versions_py_names():
    go_mod = (builder.GO_MODULES_DIR / "helm" / "go.mod").read_text()
    go_sum = (builder.GO_MODULES_DIR / "helm" / "go.sum").read_text()

    assert re.search(r"^tool helm\.sh/helm/v3/cmd/helm$", go_mod, re.M)
    assert re.search(rf"^\thelm\.sh/helm/v3 {versions.HELM_VERSION}\b", go_mod, re.M)
    assert f"helm.sh/helm/v3 {versions.HELM_VERSION} h1:" in go_sum


@pytest.mark.parametrize(
    ("name", "module", "version"),
    [
        ("containerd", "github.com/containerd/containerd/v2", versions.CONTAINERD_VERSION),
        ("traefik", "github.com/traefik/traefik/v3", versions.TRAEFIK_VERSION),
    ],
)
def test_a_cgo_free_tools_go_module_pins_the_version_versions_py_names(name, module, version):
    go_mod = (builder.GO_MODULES_DIR / name / "go.mod").read_text()
    go_sum = (builder.GO_MODULES_DIR / name / "go.sum").read_text()
    (tool,) = [build for build in builder.TOOL_BUILDS if build.name == name]

    assert re.search(rf"^\t{re.escape(module)} {version}\b", go_mod, re.M)
    assert f"{module} {version} h1:" in go_sum
    assert f"Version={version}" in " ".join(tool.ldflags)
    assert not tool.cgo


def test_traefik_is_built_with_the_nested_module_its_zip_leaves_out():
    go_mod = (builder.GO_MODULES_DIR / "traefik" / "go.mod").read_text()

    assert "replace github.com/traefik/traefik/dynamic/ext => ./ext" in go_mod
    assert (builder.GO_MODULES_DIR / "traefik" / "ext" / "go.mod").exists()


def test_helm_is_a_tool_apart_from_the_cluster_binaries():
    helm = next(build for build in builder.TOOL_BUILDS if build.name == "helm")

    assert helm.binaries == ("helm",)
    assert "helm" not in builder.ALL_BINARIES
    assert "helm" not in {build.name for build in builder.MODULE_BUILDS}
    assert "helm" not in versions.versions_key()
    assert f"version={versions.HELM_VERSION}" in " ".join(helm.ldflags)


def test_the_tool_counts_as_built_only_with_its_own_stamp(tmp_path, monkeypatch):
    monkeypatch.setenv("DEVCLUSTER_CACHE", str(tmp_path))
    helm = next(build for build in builder.TOOL_BUILDS if build.name == "helm")
    cluster_stamp = builder.expected_stamp()
    builder.bin_dir().mkdir(parents=True)
    (builder.binary("helm")).write_text("#!/bin/sh\n")
    (builder.binary("helm")).chmod(0o755)
    assert not builder.tool_built(helm)

    builder.tool_stamp_path(helm).write_text(builder.tool_stamp(helm))
    assert builder.tool_built(helm)
    assert builder.expected_stamp() == cluster_stamp

    builder.tool_stamp_path(helm).write_text("helm gomodules-sha256=old\n")
    assert not builder.tool_built(helm)
