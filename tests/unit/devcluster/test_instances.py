"""Several devclusters side by side: each instance's ports, state directory and node set."""

from pathlib import Path

import pytest

from devcluster import cli, cluster, components
from devcluster import settings as settings_module
from devcluster.settings import DEFAULT_STATE_DIR, MAX_INSTANCE, Settings

PORT_VARIABLES = [variable for variable, _ in settings_module._PORT_DEFAULTS.values()]
NODE_VARIABLES = (
    "DEVCLUSTER_GPU_NODES",
    "DEVCLUSTER_CPU_NODES",
    "DEVCLUSTER_GPU_MODEL",
    "DEVCLUSTER_GPUS_PER_NODE",
    "DEVCLUSTER_SECOND_GPU_NODES",
    "DEVCLUSTER_SECOND_GPU_MODEL",
)


@pytest.fixture(autouse=True)
def plain_environment(monkeypatch):
    """No DEVCLUSTER_* override from the shell running the tests."""
    for variable in (*PORT_VARIABLES, *NODE_VARIABLES, "DEVCLUSTER_STATE", "DEVCLUSTER_INSTANCE"):
        monkeypatch.delenv(variable, raising=False)


def test_instance_one_is_the_cluster_of_before():
    first = Settings.from_env()

    assert first.instance == 1
    assert first.state_dir == DEFAULT_STATE_DIR == Path("/tmp/gpuportal-devcluster")
    assert first.apiserver_port == 26443
    assert first.prometheus_port == 29090
    assert first.dcgm_port == 29400
    assert first.ports() == {
        name: default for name, (_, default) in settings_module._PORT_DEFAULTS.items()
    }
    assert Settings.from_env(1) == first


def test_instance_two_moves_every_port_by_a_hundred_and_has_a_state_dir_of_its_own(monkeypatch):
    second = Settings.from_env(2)

    assert second.instance == 2
    assert second.state_dir == Path("/tmp/gpuportal-devcluster-2")
    assert second.apiserver_url == "https://127.0.0.1:26543"
    assert second.prometheus_url == "http://127.0.0.1:29190"
    assert second.dcgm_url == "http://127.0.0.1:29500"
    first = Settings.from_env(1)
    assert {name: port - 100 for name, port in second.ports().items()} == first.ports()
    assert second.admin_kubeconfig.parent != first.admin_kubeconfig.parent
    assert second.pki_dir != first.pki_dir

    monkeypatch.setenv("DEVCLUSTER_INSTANCE", "2")
    assert Settings.from_env() == second


def test_no_port_of_any_instance_is_a_port_of_another_or_twice_in_one():
    instances = [Settings.from_env(n) for n in range(1, MAX_INSTANCE + 1)]

    ports = [port for settings in instances for port in settings.ports().values()]
    assert len(ports) == len(set(ports))
    assert max(ports) < 32768  # below Linux's ephemeral ports
    assert len({settings.state_dir for settings in instances}) == MAX_INSTANCE


def test_overrides_describe_instance_one_and_the_others_move_with_them(monkeypatch, tmp_path):
    monkeypatch.setenv("DEVCLUSTER_STATE", str(tmp_path / "mine"))
    monkeypatch.setenv("DEVCLUSTER_APISERVER_PORT", "30443")

    first, second = Settings.from_env(1), Settings.from_env(2)

    assert (first.state_dir, second.state_dir) == (tmp_path / "mine", tmp_path / "mine-2")
    assert (first.apiserver_port, second.apiserver_port) == (30443, 30543)


@pytest.mark.parametrize("instance", [0, MAX_INSTANCE + 1, -1])
def test_an_instance_out_of_range_is_refused(instance):
    with pytest.raises(ValueError, match="1 to 9"):
        Settings.from_env(instance)


def test_a_devcluster_instance_that_is_no_number_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv("DEVCLUSTER_INSTANCE", "two")

    with pytest.raises(ValueError, match="DEVCLUSTER_INSTANCE"):
        Settings.from_env()


def test_the_recorded_settings_of_an_instance_are_read_back_for_that_instance(
    monkeypatch, tmp_path
):
    monkeypatch.setenv("DEVCLUSTER_STATE", str(tmp_path / "state"))
    Settings.from_env(2).state_dir.mkdir(parents=True)
    monkeypatch.setenv("DEVCLUSTER_KUEUE", "0")
    Settings.from_env(2).record()
    monkeypatch.setenv("DEVCLUSTER_KUEUE", "1")

    assert settings_module.current(2).kueue is False
    assert settings_module.current(2).instance == 2
    assert settings_module.current(1).kueue is True
    monkeypatch.setenv("DEVCLUSTER_INSTANCE", "2")
    assert settings_module.current() == settings_module.current(2)


def test_each_instance_starts_its_processes_on_its_own_ports_and_files(monkeypatch):
    monkeypatch.setenv("DEVCLUSTER_PROMETHEUS_BIN", "/usr/bin/prometheus")
    first, second = Settings.from_env(1), Settings.from_env(2)
    by_name = components.COMPONENTS_BY_NAME

    for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kwok", "prometheus"):
        one = set(by_name[name].command(first)[1:])
        two = set(by_name[name].command(second)[1:])
        # The same port, or a file of the first's state, in both (files of the repository, such
        # as its kwok stages, are shared read-only; the checkout may itself be under /tmp).
        shared = {arg for arg in one & two if f"{first.state_dir}/" in arg or "127.0.0.1:" in arg}
        assert not shared, name
    assert f"--port={second.dcgm_port}" in components._dcgm_command(second)
    assert f"--secure-port={second.apiserver_port}" in components._apiserver_command(second)


def test_the_second_instance_has_fewer_gpus_of_another_model():
    first = cluster.NodeOptions.from_env(1).specs()
    second = cluster.NodeOptions.from_env(2).specs()

    assert {s.gpu_model for s in first if s.gpus} == {
        "NVIDIA-A100-SXM4-80GB",
        "NVIDIA-H100-80GB-HBM3",
    }
    assert [(s.name, s.gpu_model, s.gpus) for s in second if s.gpus] == [
        ("gpu-node-0", "NVIDIA-L40S", 4),
        ("gpu-node-1", "NVIDIA-L40S", 4),
    ]
    assert sum(s.gpus for s in first) == 48
    assert sum(s.gpus for s in second) == 8
    assert cluster.NodeOptions.from_env(3) == cluster.NodeOptions.from_env(2)


def test_node_variables_still_choose_the_nodes_of_any_instance(monkeypatch):
    monkeypatch.setenv("DEVCLUSTER_GPU_NODES", "3")

    assert cluster.NodeOptions.from_env(2).gpu_nodes == 3
    assert cluster.NodeOptions.from_env(2).gpu_model == "NVIDIA-L40S"


def test_the_command_line_instance_reaches_everything_through_the_environment(
    monkeypatch, tmp_path, capsys
):
    monkeypatch.setenv("DEVCLUSTER_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("DEVCLUSTER_INSTANCE", "1")

    assert cli.main(["--instance", "2", "status"]) == 1  # nothing runs there

    assert settings_module.current() == Settings.from_env(2)
    assert f"state dir: {tmp_path / 'state-2'}" in capsys.readouterr().out
    parser = cli.build_parser()
    assert parser.parse_args(["env"]).instance is None
    for bad in ("0", "10", "x"):
        with pytest.raises(SystemExit):
            parser.parse_args(["--instance", bad, "env"])


def test_env_lines_point_at_each_instances_own_kubeconfig_and_prometheus():
    first, second = Settings.from_env(1), Settings.from_env(2)

    assert cluster.env_lines(second) == [
        "export KUBECONFIG=/tmp/gpuportal-devcluster-2/admin.kubeconfig",
        "export PROMETHEUS_URL=http://127.0.0.1:29190",
    ]
    assert cluster.env_lines(first) == [
        "export KUBECONFIG=/tmp/gpuportal-devcluster/admin.kubeconfig",
        "export PROMETHEUS_URL=http://127.0.0.1:29090",
    ]
