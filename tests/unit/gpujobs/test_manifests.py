"""The Job a GPU job becomes: GPU limits on the GPU container only, placement on GPU nodes,
deadlines, ownership labels, and the command as the user's own list."""

from decimal import Decimal

import pytest

from clusters.vocabulary import JOB_NAME_ANNOTATION
from gpujobs import manifests
from gpujobs.manifests import JobSpec
from gpujobs.specs import JobRequest, PreprocessMode, PreprocessRequest
from workloads.manifests import Placement
from workloads.specs import ContainerRequest

PLACEMENT = Placement()
CONTAINER_FIELDS = ("image", "command", "args", "env", "cpu_cores", "memory_gib")


def spec(*, job_id=17, namespace="vision", ttl_seconds_after_finished=86400, **kwargs) -> JobSpec:
    kwargs.setdefault("name", "bert-finetune")
    kwargs.setdefault("image", "registry.example.com/vision/trainer:1.4")
    kwargs.setdefault("gpus", 2)
    kwargs.setdefault("max_runtime_seconds", 3600)
    main = ContainerRequest(**{k: kwargs.pop(k) for k in CONTAINER_FIELDS if k in kwargs})
    return JobSpec(
        job_id=job_id,
        namespace=namespace,
        request=JobRequest(main=main, **kwargs),
        ttl_seconds_after_finished=ttl_seconds_after_finished,
    )


def preprocessing(*, mode=PreprocessMode.BEFORE, **container) -> PreprocessRequest:
    return PreprocessRequest(container=ContainerRequest(**container), mode=mode)


def build(placement=PLACEMENT, **kwargs) -> dict:
    return manifests.job_manifest(spec(**kwargs), placement)


def pod_spec(job: dict) -> dict:
    return job["spec"]["template"]["spec"]


def containers(job: dict) -> dict[str, dict]:
    pod = pod_spec(job)
    return {c["name"]: c for c in [*pod.get("initContainers", []), *pod["containers"]]}


def test_job_is_batch_v1_named_after_the_portal_id_in_the_team_namespace():
    job = build()

    assert job["apiVersion"] == "batch/v1"
    assert job["kind"] == "Job"
    assert job["metadata"]["name"] == "gpujob-17"
    assert job["metadata"]["namespace"] == "vision"
    assert job["metadata"]["annotations"][JOB_NAME_ANNOTATION] == "bert-finetune"


def test_gpus_are_limits_of_the_gpu_container():
    main = containers(build(gpus=4))["main"]

    assert main["resources"]["limits"] == {"nvidia.com/gpu": "4"}
    assert "requests" not in main["resources"]


def test_gpu_resource_name_comes_from_the_spec():
    main = containers(build(gpus=1, gpu_resource="nvidia.com/mig-1g.10gb"))["main"]

    assert main["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": "1"}


def test_cpu_and_memory_are_requested_as_much_as_limited():
    main = containers(build(cpu_cores=Decimal("1.5"), memory_gib=Decimal("0.5")))["main"]

    assert main["resources"]["limits"] == {
        "nvidia.com/gpu": "2",
        "cpu": "1500m",
        "memory": "512Mi",
    }
    assert main["resources"]["requests"] == {"cpu": "1500m", "memory": "512Mi"}


def test_required_node_affinity_is_the_clusters_gpu_node_selector():
    affinity = pod_spec(build())["affinity"]["nodeAffinity"]

    terms = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [
        {"matchExpressions": [{"key": "hardware-type", "operator": "In", "values": ["gpu"]}]}
    ]
    assert "preferredDuringSchedulingIgnoredDuringExecution" not in affinity


def test_chosen_gpu_model_joins_the_same_required_term():
    placement = Placement(gpu_model_label="nvidia.com/gpu.product")
    affinity = pod_spec(build(placement, gpu_model="NVIDIA-H100-80GB-HBM3"))["affinity"]

    (term,) = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchExpressions"] == [
        {"key": "hardware-type", "operator": "In", "values": ["gpu"]},
        {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]},
    ]


def test_a_cluster_with_other_gpu_labels_gets_one_expression_per_label():
    placement = Placement(node_selector={"pool": "a100", "accelerator": "nvidia"})
    (term,) = pod_spec(build(placement))["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]

    assert term["matchExpressions"] == [
        {"key": "accelerator", "operator": "In", "values": ["nvidia"]},
        {"key": "pool", "operator": "In", "values": ["a100"]},
    ]


def test_pod_tolerates_the_clusters_gpu_taint():
    assert pod_spec(build(Placement(gpu_taint_key="example.com/gpu")))["tolerations"] == [
        {"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]


def test_deadline_retries_and_time_to_live():
    job_spec = build(max_runtime_seconds=7200, backoff_limit=2, ttl_seconds_after_finished=600)[
        "spec"
    ]

    assert job_spec["activeDeadlineSeconds"] == 7200
    assert job_spec["backoffLimit"] == 2
    assert job_spec["ttlSecondsAfterFinished"] == 600
    assert job_spec["completions"] == 1
    assert job_spec["parallelism"] == 1
    assert job_spec["template"]["spec"]["restartPolicy"] == "Never"


def test_job_and_pod_carry_ownership_team_and_job_id_labels():
    job = build(job_id=5, namespace="speech")
    expected = {
        "app.kubernetes.io/managed-by": "gpu-portal",
        "gpuportal.io/team": "speech",
        "gpuportal.io/job-id": "5",
    }

    assert job["metadata"]["labels"] == expected
    assert job["spec"]["template"]["metadata"]["labels"] == expected


def test_portal_name_is_the_managed_by_value():
    job = build(Placement(portal_name="acme-gpus"))

    assert job["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "acme-gpus"


def test_command_and_args_are_passed_as_the_users_lists():
    main = containers(
        build(command=("python", "-c", "print('a; rm -rf /')"), args=("--lr", "3e-4 $HOME"))
    )["main"]

    assert main["command"] == ["python", "-c", "print('a; rm -rf /')"]
    assert main["args"] == ["--lr", "3e-4 $HOME"]


def test_no_command_keeps_the_images_entrypoint():
    main = containers(build())["main"]

    assert "command" not in main
    assert "args" not in main


def test_env_vars_in_order():
    main = containers(build(env=(("B", "2"), ("A", "x=y"))))["main"]

    assert main["env"] == [{"name": "B", "value": "2"}, {"name": "A", "value": "x=y"}]


def test_preprocessing_before_is_an_init_container_without_gpus():
    job = build(
        preprocess=preprocessing(
            image="text-cleaner:latest",
            mode=PreprocessMode.BEFORE,
            command=("clean", "--in", "/data"),
            cpu_cores=Decimal("1"),
            memory_gib=Decimal("0.5"),
        )
    )
    pod = pod_spec(job)

    (init,) = pod["initContainers"]
    assert [c["name"] for c in pod["containers"]] == ["main"]
    assert init["name"] == "preprocess"
    assert init["command"] == ["clean", "--in", "/data"]
    assert init["resources"] == {
        "limits": {"cpu": "1000m", "memory": "512Mi"},
        "requests": {"cpu": "1000m", "memory": "512Mi"},
    }


def test_preprocessing_beside_is_a_second_container_without_gpus():
    job = build(preprocess=preprocessing(image="text-cleaner:latest", mode=PreprocessMode.BESIDE))
    pod = pod_spec(job)

    assert "initContainers" not in pod
    assert [c["name"] for c in pod["containers"]] == ["main", "preprocess"]
    pre = pod["containers"][1]
    assert "resources" not in pre  # the namespace's defaults; never GPUs


@pytest.mark.parametrize("mode", [PreprocessMode.BEFORE, PreprocessMode.BESIDE])
def test_only_the_gpu_container_asks_for_gpus(mode):
    job = build(preprocess=preprocessing(image="cleaner", mode=mode, cpu_cores=Decimal("2")))

    for name, container in containers(job).items():
        resources = container.get("resources", {})
        gpu_keys = [k for part in resources.values() for k in part if "gpu" in k]
        assert (name == "main") == bool(gpu_keys), name


def test_cpu_only_container_is_hidden_from_the_nodes_gpus():
    job = build(
        env=(("NVIDIA_VISIBLE_DEVICES", "all"), ("DATA", "/d")),
        preprocess=preprocessing(image="cleaner", mode=PreprocessMode.BESIDE),
    )
    pre = containers(job)["preprocess"]

    assert pre["env"] == [
        {"name": "DATA", "value": "/d"},
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},
    ]


def test_pod_annotations_from_the_spec():
    job = build(annotations=(("example.com/owner", "ml"),))

    assert job["spec"]["template"]["metadata"]["annotations"] == {"example.com/owner": "ml"}


def test_pods_do_not_get_api_credentials():
    pod = pod_spec(build())

    assert pod["automountServiceAccountToken"] is False
    assert pod["enableServiceLinks"] is False


@pytest.mark.parametrize(
    ("name", "job_id"),
    [
        ("gpujob-17", 17),
        ("gpujob-1", 1),
        ("gpujob-017", None),
        ("gpujob-", None),
        ("other-17", None),
        ("gpujob-17-abcde", None),
    ],
)
def test_job_id_from_name(name, job_id):
    assert manifests.job_id_from_name(name) == job_id


def test_same_spec_gives_the_same_manifest():
    assert build() == build()


# --- Pod Security ------------------------------------------------------------------------------


def test_every_container_drops_every_capability_and_cannot_escalate():
    job = build(preprocess=preprocessing(image="registry.example.com/cleaner:1"))

    for container in containers(job).values():
        assert container["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        }


def test_pods_run_under_the_runtimes_default_seccomp_profile_as_any_user_under_baseline():
    assert pod_spec(build())["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}


def test_pods_run_as_non_root_where_the_cluster_enforces_restricted():
    job = build(Placement(pod_security_level="restricted"))

    assert pod_spec(job)["securityContext"] == {
        "seccompProfile": {"type": "RuntimeDefault"},
        "runAsNonRoot": True,
    }


def queued(*, queue="opportunistic", priority="opportunistic", borrower=None) -> dict:
    base = spec(priority=priority)
    queued_spec = JobSpec(
        job_id=base.job_id,
        namespace=base.namespace,
        request=base.request,
        ttl_seconds_after_finished=base.ttl_seconds_after_finished,
        queue=queue,
        borrower=borrower,
    )
    return manifests.job_manifest(queued_spec, PLACEMENT)


def test_a_queued_job_is_suspended_in_the_teams_local_queue_at_its_priority_class():
    job = queued()

    assert job["spec"]["suspend"] is True
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "opportunistic"
    assert job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "gpu-portal-opportunistic"
    assert "kueue.x-k8s.io/queue-name" not in job["spec"]["template"]["metadata"]["labels"]


def test_a_borrower_gets_the_clusters_grace_period_and_starts_protected_where_it_has_one():
    plain = queued(borrower=manifests.Borrower(grace_seconds=120))
    protected = queued(borrower=manifests.Borrower(grace_seconds=0, protected=True))

    assert pod_spec(plain)["terminationGracePeriodSeconds"] == 120
    assert plain["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == (
        "gpu-portal-opportunistic"
    )
    assert pod_spec(protected)["terminationGracePeriodSeconds"] == 0
    assert protected["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == (
        "gpu-portal-opportunistic-protected"
    )
    assert "terminationGracePeriodSeconds" not in pod_spec(queued(queue="guaranteed"))


def test_a_job_under_quota_only_has_no_queue_and_is_not_suspended():
    job = build(priority="opportunistic")

    assert "suspend" not in job["spec"]
    assert not [label for label in job["metadata"]["labels"] if label.startswith("kueue.")]
