"""Small pure pieces of the devcluster: node manifests, certificate subjects, file names."""

import yaml

from devcluster import bootstrap, cluster, components, credentials, nodes, pki, tenant_metrics
from devcluster import settings as settings_module
from devcluster.settings import Settings


def test_a_gpu_node_is_labelled_tainted_and_offers_eight_gpus():
    manifest = nodes.NodeSpec(name="gpu-node-0", gpus=8).to_manifest()

    labels = manifest["metadata"]["labels"]
    assert labels["hardware-type"] == "gpu"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert labels["type"] == "kwok"
    assert manifest["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert manifest["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert manifest["spec"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    ]


def test_a_cpu_node_has_no_gpu_resource_and_no_taint():
    manifest = nodes.NodeSpec(name="cpu-node-0").to_manifest()

    assert manifest["metadata"]["labels"]["hardware-type"] == "cpu"
    assert "nvidia.com/gpu" not in manifest["status"]["allocatable"]
    assert manifest["spec"]["taints"] == []


def test_the_default_node_set_is_gpu_nodes_then_cpu_nodes():
    specs = nodes.default_node_specs(gpu_nodes=2, cpu_nodes=1, gpu_model="Tesla-T4")

    assert [s.name for s in specs] == ["gpu-node-0", "gpu-node-1", "cpu-node-0"]
    assert specs[0].gpu_model == "Tesla-T4"


def test_the_second_gpu_model_gets_its_own_named_nodes_between_the_first_and_the_cpu_nodes():
    specs = nodes.default_node_specs(gpu_nodes=1, cpu_nodes=1, second_gpu_nodes=2)

    assert [(s.name, s.gpu_model) for s in specs] == [
        ("gpu-node-0", "NVIDIA-A100-SXM4-80GB"),
        ("gpu-node-h100-0", "NVIDIA-H100-80GB-HBM3"),
        ("gpu-node-h100-1", "NVIDIA-H100-80GB-HBM3"),
        ("cpu-node-0", "NVIDIA-A100-SXM4-80GB"),
    ]
    assert specs[1].to_manifest()["metadata"]["labels"]["nvidia.com/gpu.product"] == (
        "NVIDIA-H100-80GB-HBM3"
    )
    assert nodes.short_model_name("Tesla-T4") == "t4"


def test_the_default_cluster_has_four_a100_and_two_h100_nodes(monkeypatch):
    for variable in (
        "DEVCLUSTER_GPU_NODES",
        "DEVCLUSTER_SECOND_GPU_NODES",
        "DEVCLUSTER_GPU_MODEL",
        "DEVCLUSTER_SECOND_GPU_MODEL",
    ):
        monkeypatch.delenv(variable, raising=False)

    specs = cluster.NodeOptions.from_env().specs()

    models = [s.gpu_model for s in specs if s.gpus]
    assert models.count("NVIDIA-A100-SXM4-80GB") == 4
    assert models.count("NVIDIA-H100-80GB-HBM3") == 2


def test_kueue_is_on_unless_switched_off_and_a_running_clusters_choice_is_remembered(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("DEVCLUSTER_STATE", str(tmp_path))
    monkeypatch.delenv("DEVCLUSTER_KUEUE", raising=False)
    assert Settings.from_env().kueue is True

    monkeypatch.setenv("DEVCLUSTER_KUEUE", "0")
    Settings.from_env().record()
    monkeypatch.setenv("DEVCLUSTER_KUEUE", "1")

    assert Settings.from_env().kueue is True
    assert settings_module.current().kueue is False
    assert "kueue" not in [c.name for c in components.components(settings_module.current())]


def test_a_certificate_subject_has_one_organization_per_group_and_escapes_separators():
    assert pki.subject("alice", ["team-a", "system:authenticated"]) == (
        "/O=team-a/O=system:authenticated/CN=alice"
    )
    assert pki.subject("a/b", ["x+y"]) == "/O=x\\+y/CN=a\\/b"


def test_minted_kubeconfig_names_are_readable_and_differ_by_groups():
    plain = credentials.kubeconfig_filename("alice@example.com", [])
    grouped = credentials.kubeconfig_filename("alice@example.com", ["team-a"])

    assert plain.startswith("alice_example.com-")
    assert plain != grouped


def test_a_fresh_start_discards_cluster_objects_and_metrics_but_keeps_the_ca(tmp_path, monkeypatch):
    monkeypatch.setenv("DEVCLUSTER_STATE", str(tmp_path))
    settings = Settings.from_env()
    for directory in (settings.etcd_data_dir / "member", settings.prometheus_data_dir / "wal"):
        directory.mkdir(parents=True)
        (directory / "data").write_text("from an earlier run")
    settings.pki_dir.mkdir()
    (settings.pki_dir / "ca.crt").write_text("the cluster CA")

    cluster.discard_cluster_data(settings)

    assert not settings.etcd_data_dir.exists()
    assert not settings.prometheus_data_dir.exists()
    assert (settings.pki_dir / "ca.crt").read_text() == "the cluster CA"
    cluster.discard_cluster_data(settings)  # nothing left to discard is not an error


def test_prometheus_also_scrapes_tenant_targets_from_files_without_honouring_their_labels(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("DEVCLUSTER_STATE", str(tmp_path))
    settings = Settings.from_env()

    bootstrap.write_prometheus_config(settings)

    config = yaml.safe_load((tmp_path / "prometheus" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert jobs["dcgm-exporter"]["honor_labels"] is True
    tenant = jobs[tenant_metrics.TENANT_JOB]
    assert "honor_labels" not in tenant  # a pod's own job label becomes exported_job
    assert tenant["file_sd_configs"] == [
        {"files": [f"{tmp_path}/prometheus/tenant-targets/*.json"], "refresh_interval": "5s"}
    ]
    assert tenant_metrics.targets_dir(settings).is_dir()  # watched from the start
