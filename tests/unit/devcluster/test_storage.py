"""The devcluster's storage provisioner (devcluster/storage.py): local-path-provisioner built from
the Go module pinned in gomodules/local-path-provisioner at the version versions.py names (a
tool under a stamp of its own), with the default StorageClass, volumes in the state directory
and helper pods that run on the real node from an image it holds."""

import json
import re

import yaml

from devcluster import builder, cli, cluster, real_node, storage, versions
from devcluster.settings import Settings


def test_the_go_module_pins_the_version_versions_py_names():
    go_mod = (builder.GO_MODULES_DIR / "local-path-provisioner" / "go.mod").read_text()
    go_sum = (builder.GO_MODULES_DIR / "local-path-provisioner" / "go.sum").read_text()
    (tool,) = [build for build in builder.TOOL_BUILDS if build.name == "local-path-provisioner"]
    version = versions.LOCAL_PATH_PROVISIONER_VERSION

    assert re.search(r"^tool github\.com/rancher/local-path-provisioner$", go_mod, re.M)
    assert re.search(rf"^\tgithub\.com/rancher/local-path-provisioner {version}\b", go_mod, re.M)
    assert f"github.com/rancher/local-path-provisioner {version} h1:" in go_sum
    assert f"-X main.VERSION={version}" in tool.ldflags
    assert tool.binaries == ("local-path-provisioner",)
    assert not tool.cgo


def test_it_is_a_tool_apart_from_the_cluster_binaries():
    assert "local-path-provisioner" not in builder.ALL_BINARIES
    assert "local-path-provisioner" not in {build.name for build in builder.MODULE_BUILDS}
    assert "local-path" not in versions.versions_key()


def test_the_storage_class_is_the_clusters_default_bound_when_a_pod_uses_a_claim():
    (storage_class,) = [obj for obj in storage.objects() if obj["kind"] == "StorageClass"]

    assert storage_class["metadata"]["name"] == "local-path"
    assert storage_class["metadata"]["annotations"] == {
        "storageclass.kubernetes.io/is-default-class": "true"
    }
    assert storage_class["provisioner"] == "rancher.io/local-path"
    assert storage_class["volumeBindingMode"] == "WaitForFirstConsumer"
    assert storage_class["reclaimPolicy"] == "Delete"


def test_the_real_nodes_volumes_are_in_the_state_directory_and_writable_by_anyone(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("DEVCLUSTER_STATE", str(tmp_path))
    settings = Settings.from_env()
    paths = {entry["node"]: entry["paths"] for entry in storage.config(settings)["nodePathMap"]}

    assert paths == {
        real_node.REAL_NODE_NAME: [str(tmp_path / "storage" / "volumes")],
        "DEFAULT_PATH_FOR_NON_LISTED_NODES": [str(tmp_path / "storage" / "simulated")],
    }
    (config_map,) = [obj for obj in storage.objects() if obj["kind"] == "ConfigMap"]
    assert 'mkdir -m 0777 -p "$VOL_DIR"' in config_map["data"]["setup"]
    assert 'rm -rf "$VOL_DIR"' in config_map["data"]["teardown"]


def test_helper_pods_run_on_the_real_node_from_an_image_it_holds_and_finish_at_once_on_kwok():
    pod = storage.helper_pod("localhost/gpuportal-base:abc")
    (container,) = pod["spec"]["containers"]

    assert container["name"] == "helper-pod"  # the container whose log the provisioner reads
    assert container["image"] == "localhost/gpuportal-base:abc"
    assert container["imagePullPolicy"] == "Never"
    assert real_node.TOLERATION in pod["spec"]["tolerations"]
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert pod["metadata"]["annotations"] == {"devcluster.gpuportal.io/complete-after-seconds": "0"}


def test_the_provisioner_reads_no_configmap_secret_or_pod_beyond_its_namespace():
    by_kind = {obj["kind"]: obj for obj in storage.objects()}
    cluster_wide = {
        resource for rule in by_kind["ClusterRole"]["rules"] for resource in rule["resources"]
    }
    namespaced = {resource for rule in by_kind["Role"]["rules"] for resource in rule["resources"]}

    assert cluster_wide == {
        "nodes",
        "persistentvolumeclaims",
        "persistentvolumes",
        "events",
        "storageclasses",
    }
    assert namespaced == {"pods", "pods/log"}
    assert by_kind["Role"]["metadata"]["namespace"] == storage.NAMESPACE
    for binding in ("ClusterRoleBinding", "RoleBinding"):
        assert by_kind[binding]["subjects"] == [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": storage.IDENTITY}
        ]


def test_the_provisioner_is_configured_by_files_not_by_what_it_reads_from_the_cluster(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("DEVCLUSTER_STATE", str(tmp_path))
    settings = Settings.from_env()

    assert storage.write_configs(settings, "localhost/base:1") is True
    assert storage.write_configs(settings, "localhost/base:1") is False
    assert storage.write_configs(settings, "localhost/base:2") is True
    command = storage.COMPONENT.command(settings)
    assert f"--config={tmp_path / 'storage' / 'config.json'}" in command
    assert f"--helper-pod-file={tmp_path / 'storage' / 'helperPod.yaml'}" in command
    assert json.loads((tmp_path / "storage" / "config.json").read_text()) == storage.config(
        settings
    )
    helper = yaml.safe_load((tmp_path / "storage" / "helperPod.yaml").read_text())
    assert helper["spec"]["containers"][0]["image"] == "localhost/base:2"


def test_it_counts_as_started_once_its_log_since_its_last_start_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("DEVCLUSTER_STATE", str(tmp_path))
    settings = Settings.from_env()
    settings.log_dir.mkdir(parents=True)
    log = settings.log_dir / "storage.log"

    log.write_text(f"\n=== 1 starting: x\n{storage.STARTED} rancher.io/local-path!\n")
    assert storage._started(settings)
    log.write_text(log.read_text() + "\n=== 2 starting: x\nStarting provisioner controller\n")
    assert not storage._started(settings)


def test_a_fresh_start_discards_the_volumes_with_the_objects_that_named_them(tmp_path, monkeypatch):
    monkeypatch.setenv("DEVCLUSTER_STATE", str(tmp_path))
    settings = Settings.from_env()
    volume = storage.volumes_dir(settings) / "pvc-1_team-a_data"
    volume.mkdir(parents=True)
    (volume / "file").write_text("from an earlier run")

    cluster.discard_cluster_data(settings)

    assert not storage.volumes_dir(settings).exists()


def test_up_storage_and_image_notebook_are_commands():
    parser = cli.build_parser()

    assert parser.parse_args(["up", "--storage"]).storage is True
    assert parser.parse_args(["image", "--notebook", "--load"]).notebook is True
