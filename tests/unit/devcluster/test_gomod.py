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
    assert not builder.is_built()

    (bin_dir / builder.STAMP_NAME).write_text(builder.expected_stamp())
    assert builder.is_built()

    (bin_dir / builder.STAMP_NAME).write_text("kubernetes=v1.0.0\n")
    assert not builder.is_built()
