"""A service's input read into request objects: every bad field named, the sidecar never asks
for GPUs, probes start with '/', ports and replicas in range, weights adding up to 100."""

import pytest
from django.core.exceptions import ValidationError

from serving.specs import (
    DeployRequest,
    ProbeKind,
    RevisionRequest,
    read_split,
    read_variants,
    revision_changes,
)

GOOD = {
    "name": "llm",
    "image": "registry.example.com/vision/llm-server:2.1",
    "gpus": 1,
    "port": 8000,
    "replicas": 2,
    "probe": "http",
    "probe_path": "/healthz",
}


def errors_of(data) -> dict:
    with pytest.raises(ValidationError) as refused:
        DeployRequest.parse(data)
    return refused.value.message_dict


def test_a_good_deploy_reads_into_its_request():
    request = DeployRequest.parse(
        {**GOOD, "sidecar": {"image": "registry.example.com/vision/pre:1", "cpu_cores": "1"}}
    )

    assert request.name == "llm"
    assert request.replicas == 2
    assert request.revision.port == 8000
    assert request.revision.probe.path == "/healthz"
    assert request.revision.sidecar.image == "registry.example.com/vision/pre:1"


@pytest.mark.parametrize("replicas", [0, -1, "0", 101, "two", 1.5, True])
def test_replicas_out_of_range_are_named(replicas):
    assert "replicas" in errors_of({**GOOD, "replicas": replicas})


@pytest.mark.parametrize("port", [0, -80, 65536, 100000, "http"])
def test_ports_out_of_range_are_named(port):
    assert "port" in errors_of({**GOOD, "port": port})


@pytest.mark.parametrize("path", ["healthz", "health z", "", " /x"])
def test_a_probe_path_without_a_leading_slash_is_named(path):
    data = {**GOOD, "probe_path": path}
    if path == "":
        assert DeployRequest.parse(data).revision.probe.path == "/"  # the default
        return
    assert list(errors_of(data)) == ["probe_path"]


def test_a_tcp_probe_needs_no_path():
    request = DeployRequest.parse({**GOOD, "probe": "tcp", "probe_path": "ignored"})

    assert request.revision.probe.kind == ProbeKind.TCP
    assert request.revision.probe.path == ""


def test_an_unknown_probe_is_named():
    assert list(errors_of({**GOOD, "probe": "grpc"})) == ["probe"]


@pytest.mark.parametrize("gpus", [1, "2"])
def test_a_sidecar_asking_for_gpus_is_refused_under_sidecar(gpus):
    errors = errors_of({**GOOD, "sidecar": {"image": "registry.example.com/pre:1", "gpus": gpus}})

    assert list(errors) == ["sidecar"]
    assert "asks for no GPUs" in errors["sidecar"][0]


def test_a_sidecar_with_gpus_zero_is_a_sidecar_without_gpus():
    request = DeployRequest.parse(
        {**GOOD, "sidecar": {"image": "registry.example.com/p:1", "gpus": 0}}
    )

    assert request.revision.sidecar is not None


def test_every_bad_field_is_named_at_once():
    errors = errors_of({"name": "Not A Label", "image": "", "gpus": 0, "port": 0, "replicas": 0})

    assert set(errors) >= {"name", "image", "gpus", "port", "replicas"}


def test_a_new_revision_keeps_what_it_does_not_change():
    base = DeployRequest.parse({**GOOD, "sidecar": {"image": "registry.example.com/p:1"}}).revision

    changed = RevisionRequest.parse(
        revision_changes(base, {"image": "registry.example.com/vision/llm-server:2.2"})
    )

    assert changed.main.image.endswith(":2.2")
    assert (changed.port, changed.gpus, changed.probe, changed.sidecar) == (
        base.port,
        base.gpus,
        base.probe,
        base.sidecar,
    )


def test_a_stored_revision_gives_back_its_request():
    class Row:
        image = "registry.example.com/x:1"
        command, args = ["serve"], ["--port", "8000"]
        env = [{"name": "MODEL", "value": "llama"}]
        cpu_cores = memory_gib = None
        gpus, port = 2, 8000
        gpu_resource, gpu_model = "nvidia.com/gpu", ""
        probe, probe_path = "http", "/ready"
        sidecar = {"image": "registry.example.com/p:1", "env": [{"name": "A", "value": "b"}]}
        annotations = {"b": "2", "a": "1"}

    request = RevisionRequest.from_model(Row)

    assert RevisionRequest.parse(request.as_data()) == request


@pytest.mark.parametrize(
    ("split", "message"),
    [
        ([{"revision": 1, "weight": 90}, {"revision": 2, "weight": 5}], "add up to 95%"),
        ({"1": 60, "2": 60}, "add up to 120%"),
        ([{"revision": 1, "weight": 100}], "each live revision"),
        ([{"revision": 1, "weight": 101}, {"revision": 2, "weight": -1}], "between 0 and 100"),
        ("90/10", "Give the split"),
    ],
)
def test_a_split_that_does_not_add_up_to_100_is_named(split, message):
    errors = {}

    read_split(split, errors=errors, live={1, 2})

    assert message in errors["split"]


def test_a_split_of_the_live_revisions_adding_up_to_100_is_read():
    errors = {}

    assert read_split({"1": 90, "2": 10}, errors=errors, live={1, 2}) == {1: 90, 2: 10}
    assert errors == {}


@pytest.mark.parametrize(
    ("variants", "message"),
    [
        ([{"name": "a", "weight": 50}, {"name": "b", "weight": 40}], "add up to 90%"),
        ([{"name": "a", "weight": 50}, {"name": "a", "weight": 50}], "different names"),
        ([{"name": "Not OK", "weight": 50}, {"name": "b", "weight": 50}], "not a variant name"),
        ([{"name": "a", "weight": 100}], "Give two variants"),
    ],
)
def test_bad_variants_are_named(variants, message):
    errors = {}

    assert read_variants(variants, errors=errors) is None
    assert message in errors["variants"]
