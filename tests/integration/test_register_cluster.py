"""`manage.py register_cluster`: a cluster registered from the command line, as the deploying
guide does after `helm install` (the chart's own test runs it in the portal's pod, in the
cluster, where the capacity is read through the ServiceAccount)."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from clusters.models import Cluster

pytestmark = pytest.mark.django_db


def register(*args: str) -> str:
    out = StringIO()
    call_command("register_cluster", *args, stdout=out)
    return out.getvalue()


def test_a_cluster_is_registered_with_the_given_settings_and_defaults_for_the_rest():
    out = register(
        "lab",
        "--display-name",
        "The lab",
        "--prometheus-url",
        "http://prometheus.monitoring.svc:9090",
    )

    cluster = Cluster.objects.get(name="lab")
    assert (cluster.display_name, cluster.prometheus_url) == (
        "The lab",
        "http://prometheus.monitoring.svc:9090",
    )
    assert cluster.gpu_node_selector == Cluster._meta.get_field("gpu_node_selector").default()
    assert "Cluster lab registered." in out
    # Outside a cluster and without a kubeconfig there is nothing to read GPUs from yet.
    assert "could not be read yet" in out
    assert "no kubeconfig path" in out


def test_placement_and_registries_are_set_from_their_options():
    register(
        "lab",
        "--gpu-node-selector", "pool=gpu",
        "--gpu-node-selector", "zone=a",
        "--gpu-taint-key", "example.com/gpu",
        "--allowed-registry", "registry.example.com",
        "--allowed-registry", "localhost",
    )  # fmt: skip

    cluster = Cluster.objects.get(name="lab")
    assert cluster.gpu_node_selector == {"pool": "gpu", "zone": "a"}
    assert cluster.gpu_taint_key == "example.com/gpu"
    assert cluster.allowed_registries == ["registry.example.com", "localhost"]


def test_a_name_taken_is_refused_and_the_registered_cluster_is_left_alone():
    register("lab", "--display-name", "First")

    with pytest.raises(CommandError, match=r"^name: a cluster named 'lab' is registered"):
        register("lab", "--display-name", "Second")
    assert Cluster.objects.get(name="lab").display_name == "First"


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["Not A Label"], "name"),
        (["lab", "--prometheus-url", "not a url"], "prometheus-url"),
        (["lab", "--allowed-registry", "Not A Registry"], "allowed-registry"),
        (["lab", "--gpu-node-selector", "no-equals-sign"], "gpu-node-selector"),
    ],
)
def test_bad_settings_are_refused_naming_the_option_and_nothing_is_registered(args, field):
    with pytest.raises(CommandError, match=rf"^{field}: "):
        register(*args)
    assert not Cluster.objects.exists()
