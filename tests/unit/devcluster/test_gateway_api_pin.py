"""The Gateway API's CRDs come from the Go module pinned in gomodules/gateway-api, at the version
versions.py names, and never take part in the binaries' build stamp (so fetching them never
rebuilds a binary)."""

import re

from devcluster import builder, versions


def test_the_go_module_pins_the_version_versions_py_names():
    go_mod = (builder.GO_MODULES_DIR / "gateway-api" / "go.mod").read_text()
    go_sum = (builder.GO_MODULES_DIR / "gateway-api" / "go.sum").read_text()

    assert re.search(
        rf"^require sigs\.k8s\.io/gateway-api {versions.GATEWAY_API_VERSION}$", go_mod, re.M
    )
    assert f"sigs.k8s.io/gateway-api {versions.GATEWAY_API_VERSION} h1:" in go_sum


def test_the_crds_are_files_of_their_own_apart_from_the_binaries():
    (files,) = builder.FILE_MODULES

    assert files.files_from == ("config/crd/standard",)
    assert "gateway-api" not in {build.name for build in builder.MODULE_BUILDS}
    assert "gateway" not in versions.versions_key()
