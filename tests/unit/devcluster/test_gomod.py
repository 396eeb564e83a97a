"""Generation of the replace lines that let k8s.io/kubernetes be a Go dependency."""

import pytest

from devcluster import gomod, versions

KUBERNETES_GOMOD = """module k8s.io/kubernetes

require (
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tk8s.io/kube-openapi => k8s.io/kube-openapi v0.0.0-2026
)

replace k8s.io/streaming => ./staging/src/k8s.io/streaming
"""


def test_staging_modules_are_read_from_the_kubernetes_replace_lines():
    assert gomod.staging_modules(KUBERNETES_GOMOD) == [
        "k8s.io/api",
        "k8s.io/client-go",
        "k8s.io/streaming",
    ]


def test_every_staging_module_is_mapped_to_its_published_version():
    block = gomod.replace_block(KUBERNETES_GOMOD, "v0.36.3")

    assert block == (
        "replace (\n"
        "\tk8s.io/api => k8s.io/api v0.36.3\n"
        "\tk8s.io/client-go => k8s.io/client-go v0.36.3\n"
        "\tk8s.io/streaming => k8s.io/streaming v0.36.3\n"
        ")\n"
    )


def test_a_gomod_without_staging_replaces_is_rejected():
    with pytest.raises(ValueError, match="staging"):
        gomod.replace_block("module x\n", "v0.36.3")


def test_the_staging_version_of_kubernetes_v1_minor_patch_is_v0_minor_patch():
    assert versions.staging_version("v1.36.3") == "v0.36.3"
    with pytest.raises(ValueError, match="major version"):
        versions.staging_version("v2.0.0")


def test_the_committed_kube_gomod_pins_kubernetes_and_replaces_staging_modules_consistently():
    from devcluster.builder import GO_MODULES_DIR

    text = (GO_MODULES_DIR / "kube" / "go.mod").read_text()
    staging = versions.staging_version()
    replaced = [line.split() for line in text.splitlines() if "=>" in line]
    assert len(replaced) > 20
    for module, _, target, version in replaced:
        assert module.startswith("k8s.io/")
        assert (target, version) == (module, staging)
    assert f"k8s.io/kubernetes {versions.KUBERNETES_VERSION}" in text


def test_cached_binaries_count_only_with_a_stamp_for_the_current_pins(tmp_path, monkeypatch):
    from devcluster import builder

    monkeypatch.setenv("DEVCLUSTER_CACHE", str(tmp_path))
    bin_dir = builder.bin_dir()
    assert bin_dir == tmp_path / versions.KUBERNETES_VERSION / "bin"
    assert not builder.is_built()

    bin_dir.mkdir(parents=True)
    for name in builder.ALL_BINARIES:
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    for build in builder.MODULE_BUILDS:
        for directory in build.files_from:
            (builder.module_files_dir(build.name) / directory).mkdir(parents=True)
    assert not builder.is_built()

    (bin_dir / builder.STAMP_NAME).write_text(builder.expected_stamp())
    assert builder.is_built()

    (bin_dir / builder.STAMP_NAME).write_text("kubernetes=v1.0.0\n")
    assert not builder.is_built()


def test_files_copied_from_a_module_count_as_part_of_the_build(tmp_path, monkeypatch):
    from devcluster import builder

    monkeypatch.setenv("DEVCLUSTER_CACHE", str(tmp_path))
    builder.bin_dir().mkdir(parents=True)
    for name in builder.ALL_BINARIES:
        (builder.bin_dir() / name).write_text("#!/bin/sh\n")
        (builder.bin_dir() / name).chmod(0o755)
    (builder.bin_dir() / builder.STAMP_NAME).write_text(builder.expected_stamp())

    assert builder.module_files_dir("kueue") == tmp_path / versions.KUBERNETES_VERSION / "kueue"
    assert not builder.is_built()  # Kueue's CRDs and webhook manifests are not there yet


def test_kueue_is_built_with_its_pinned_version_and_certificates_found_relative_to_its_cwd():
    from devcluster import builder

    (kueue,) = [build for build in builder.MODULE_BUILDS if build.name == "kueue"]
    assert kueue.binaries == ("kueue",)
    assert f"pkg/version.GitVersion={versions.KUEUE_VERSION}" in " ".join(kueue.ldflags)
    assert f"pkg/visibility.certDir={builder.KUEUE_CERT_DIR}" in " ".join(kueue.ldflags)
    assert not builder.KUEUE_CERT_DIR.startswith("/")
    (patch,) = kueue.patches
    assert patch.new.endswith(f'"{builder.KUEUE_CERT_DIR}"')
    gomod = (builder.GO_MODULES_DIR / "kueue" / "go.mod").read_text()
    assert f"sigs.k8s.io/kueue {versions.KUEUE_VERSION}" in gomod
    assert "tool sigs.k8s.io/kueue/cmd/kueue" in gomod


def test_a_patch_applies_only_where_its_line_is_found_exactly_once():
    from devcluster.builder import PatchedCopy, patched_source

    patch = PatchedCopy(module="m", path="main.go", target="main.go", old="a := 1", new="a := 2")

    assert patched_source("x\na := 1\ny\n", patch) == "x\na := 2\ny\n"
    with pytest.raises(ValueError, match="0 times"):
        patched_source("a := 3\n", patch)
    with pytest.raises(ValueError, match="2 times"):
        patched_source("a := 1\na := 1\n", patch)


def test_changing_a_build_recipe_changes_the_stamp(monkeypatch):
    from dataclasses import replace

    from devcluster import builder

    before = builder.expected_stamp()
    changed = tuple(
        replace(build, ldflags=(*build.ldflags, "-X a.b=c")) if build.name == "kueue" else build
        for build in builder.MODULE_BUILDS
    )
    monkeypatch.setattr(builder, "MODULE_BUILDS", changed)

    assert builder.expected_stamp() != before
