"""kwok finishes annotated pods, and the real Job controller turns that into Job conditions."""

import time

import pytest
from kubernetes import client

from tests.integration.conftest import wait_for
from tests.integration.kube import gpu_pod

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]


def gpu_job(name, annotations):
    template = gpu_pod(name, gpus=1, annotations=annotations)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {"metadata": template["metadata"], "spec": template["spec"]},
        },
    }


def job_condition(batch, name, namespace, condition_type):
    job = batch.read_namespaced_job(name, namespace)
    for condition in job.status.conditions or []:
        if condition.type == condition_type and condition.status == "True":
            return job
    return None


def test_a_job_whose_pod_is_told_to_succeed_completes(k8s, core, namespace):
    batch = client.BatchV1Api(k8s)
    batch.create_namespaced_job(
        namespace, gpu_job("finishes", {"devcluster.gpuportal.io/complete-after-seconds": "1"})
    )

    job = wait_for(
        lambda: job_condition(batch, "finishes", namespace, "Complete"),
        what="the Job to be marked Complete",
    )

    assert job.status.succeeded == 1
    (pod,) = core.list_namespaced_pod(namespace, label_selector="job-name=finishes").items
    assert pod.status.phase == "Succeeded"
    assert pod.status.container_statuses[0].state.terminated.exit_code == 0


def test_a_job_whose_pod_is_told_to_fail_is_marked_failed_with_the_exit_code(k8s, core, namespace):
    batch = client.BatchV1Api(k8s)
    batch.create_namespaced_job(
        namespace,
        gpu_job(
            "crashes",
            {
                "devcluster.gpuportal.io/complete-after-seconds": "1",
                "devcluster.gpuportal.io/exit-code": "3",
            },
        ),
    )

    job = wait_for(
        lambda: job_condition(batch, "crashes", namespace, "Failed"),
        what="the Job to be marked Failed",
    )

    assert job.status.failed == 1
    (pod,) = core.list_namespaced_pod(namespace, label_selector="job-name=crashes").items
    assert pod.status.phase == "Failed"
    terminated = pod.status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (3, "Error")


def test_a_pod_without_the_completion_annotation_keeps_running(core, namespace):
    core.create_namespaced_pod(namespace, gpu_pod("server", gpus=1))
    wait_for(
        lambda: core.read_namespaced_pod("server", namespace).status.phase == "Running",
        what="the pod to run",
    )

    time.sleep(2)
    assert core.read_namespaced_pod("server", namespace).status.phase == "Running"
