"""Helm, which the chart's tests run (tests/integration/deploy), is built from the Go module
pinned in gomodules/helm at the version versions.py names, under a stamp of its own: adding it or
moving its pin never rebuilds the cluster's binaries, nor theirs it."""

import re

from devcluster import builder, versions


def test_the_go_module_pins_the_version_versions_py_names():
    go_mod = (builder.GO_MODULES_DIR / "helm" / "go.mod").read_text()
    go_sum = (builder.GO_MODULES_DIR / "helm" / "go.sum").read_text()

    assert re.search(r"^tool helm\.sh/helm/v3/cmd/helm$", go_mod, re.M)
    assert re.search(rf"^\thelm\.sh/helm/v3 {versions.HELM_VERSION}\b", go_mod, re.M)
    assert f"helm.sh/helm/v3 {versions.HELM_VERSION} h1:" in go_sum


def test_containerds_go_module_pins_the_version_versions_py_names():
    go_mod = (builder.GO_MODULES_DIR / "containerd" / "go.mod").read_text()
    go_sum = (builder.GO_MODULES_DIR / "containerd" / "go.sum").read_text()
    (containerd,) = [build for build in builder.TOOL_BUILDS if build.name == "containerd"]

    assert re.search(
        rf"^\tgithub\.com/containerd/containerd/v2 {versions.CONTAINERD_VERSION}\b", go_mod, re.M
    )
    assert f"github.com/containerd/containerd/v2 {versions.CONTAINERD_VERSION} h1:" in go_sum
    assert f"Version={versions.CONTAINERD_VERSION}" in " ".join(containerd.ldflags)
    assert not containerd.cgo


def test_traefiks_go_module_pins_the_version_versions_py_names():
    go_mod = (builder.GO_MODULES_DIR / "traefik" / "go.mod").read_text()
    go_sum = (builder.GO_MODULES_DIR / "traefik" / "go.sum").read_text()
    (traefik,) = [build for build in builder.TOOL_BUILDS if build.name == "traefik"]

    assert re.search(
        rf"^\tgithub\.com/traefik/traefik/v3 {versions.TRAEFIK_VERSION}\b", go_mod, re.M
    )
    assert f"github.com/traefik/traefik/v3 {versions.TRAEFIK_VERSION} h1:" in go_sum
    assert f"Version={versions.TRAEFIK_VERSION}" in " ".join(traefik.ldflags)
    # The nested module its own go.mod replaces, which its module zip leaves out.
    assert "replace github.com/traefik/traefik/dynamic/ext => ./ext" in go_mod


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
