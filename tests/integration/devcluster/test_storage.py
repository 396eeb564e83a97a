"""The devcluster's storage provisioner (devcluster/storage.py: rancher's local-path-provisioner)
gives a PersistentVolumeClaim of the default StorageClass a real directory on the real node,
which outlives the pods that use it, is writable by a pod's non-root user, and goes with the
claim. A claim of a pod on a simulated node binds too, with nothing on disk."""

from __future__ import annotations

import secrets
import stat
from pathlib import Path

from devcluster import storage as storage_module
from tests.integration.conftest import wait_for
from tests.integration.devcluster.restricted import (
    MOUNT_PATH,
    delete_pod,
    finished,
    restricted_pod,
    running,
)
from tests.integration.kube import GPU_AFFINITY, GPU_TOLERATION, read_or_none

USER = 1000


def claim(name: str, size: str = "1Gi") -> dict:
    """A claim that names no StorageClass: the cluster's default gets it."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}},
    }


def test_the_default_storage_class_is_the_provisioners(storage, devcluster):
    from kubernetes import client

    with devcluster.api_client() as api:
        classes = client.StorageV1Api(api).list_storage_class().items
    defaults = [
        c
        for c in classes
        if (c.metadata.annotations or {}).get(storage_module.DEFAULT_CLASS_ANNOTATION) == "true"
    ]

    assert [c.metadata.name for c in defaults] == [storage.storage_class]
    (local_path,) = defaults
    assert local_path.provisioner == storage.provisioner == "rancher.io/local-path"
    assert local_path.volume_binding_mode == "WaitForFirstConsumer"
    assert local_path.reclaim_policy == "Delete"


def test_a_claim_keeps_its_files_across_pods_on_the_real_node_and_goes_with_its_directory(
    storage, real_node, core, namespace
):
    token = secrets.token_hex(8)
    core.create_namespaced_persistent_volume_claim(namespace, claim("data"))
    created = core.read_namespaced_persistent_volume_claim("data", namespace)
    assert created.spec.storage_class_name == storage.storage_class
    assert created.status.phase == "Pending"  # until a pod uses it (WaitForFirstConsumer)

    write = f"echo {token} > {MOUNT_PATH}/token && id -u"
    core.create_namespaced_pod(
        namespace,
        restricted_pod(
            real_node,
            "writer",
            storage.helper_image,
            command=["sh", "-c", write],
            claim="data",
            run_as_user=USER,
        ),
    )
    phase, log = finished(core, namespace, "writer")
    assert phase == "Succeeded", log
    assert log.strip() == str(USER)

    bound = core.read_namespaced_persistent_volume_claim("data", namespace)
    assert bound.status.phase == "Bound"
    volume = core.read_persistent_volume(bound.spec.volume_name)
    assert volume.metadata.annotations["pv.kubernetes.io/provisioned-by"] == storage.provisioner
    directory = Path(volume.spec.host_path.path)
    assert directory.parent == storage.volumes_dir
    (term,) = volume.spec.node_affinity.required.node_selector_terms
    assert term.match_expressions[0].values == [real_node.name]
    assert stat.S_IMODE(directory.stat().st_mode) == 0o777
    assert (directory / "token").read_text().strip() == token
    assert (directory / "token").stat().st_uid == USER

    delete_pod(core, namespace, "writer")
    core.create_namespaced_pod(
        namespace,
        restricted_pod(
            real_node,
            "reader",
            storage.helper_image,
            command=["cat", f"{MOUNT_PATH}/token"],
            claim="data",
            run_as_user=USER,
        ),
    )
    phase, log = finished(core, namespace, "reader")
    assert phase == "Succeeded", log
    assert log.strip() == token

    delete_pod(core, namespace, "reader")
    core.delete_namespaced_persistent_volume_claim("data", namespace)
    wait_for(
        lambda: not directory.exists(), timeout=90, what=f"the provisioner to remove {directory}"
    )
    wait_for(
        lambda: read_or_none(core.read_persistent_volume, volume.metadata.name) is None,
        timeout=60,
        what="the volume to go",
    )


def test_a_claim_of_a_pod_on_a_simulated_node_binds_with_nothing_on_disk(storage, core, namespace):
    core.create_namespaced_persistent_volume_claim(namespace, claim("scratch"))
    core.create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "simulated"},
            "spec": {
                "affinity": GPU_AFFINITY,
                "tolerations": [GPU_TOLERATION],
                "containers": [
                    {
                        "name": "main",
                        "image": "simulated",
                        "volumeMounts": [{"name": "scratch", "mountPath": MOUNT_PATH}],
                    }
                ],
                "volumes": [{"name": "scratch", "persistentVolumeClaim": {"claimName": "scratch"}}],
            },
        },
    )

    pod = running(core, namespace, "simulated", timeout=60)
    bound = core.read_namespaced_persistent_volume_claim("scratch", namespace)
    volume = core.read_persistent_volume(bound.spec.volume_name)
    (term,) = volume.spec.node_affinity.required.node_selector_terms
    assert term.match_expressions[0].values == [pod.spec.node_name]
    assert Path(volume.spec.host_path.path).parent == storage_module.simulated_dir(storage.settings)
    assert not Path(volume.spec.host_path.path).exists()
