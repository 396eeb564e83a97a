"""A session's run as the cluster's objects: a Job running JupyterLab under the session's path
with the member's home volume, the token from a Secret, and GPU placement and Kueue's queue only
for a GPU session."""

from decimal import Decimal

from clusters.vocabulary import (
    HOME_OWNER_LABEL,
    KUEUE_PRIORITY_CLASS_LABEL,
    KUEUE_QUEUE_LABEL,
    SESSION_ID_LABEL,
)
from interactive import manifests
from interactive.manifests import SessionSpec
from workloads.manifests import Placement
from workloads.specs import ContainerRequest

PLACEMENT = Placement()


def spec(**changes) -> SessionSpec:
    values = dict(
        session_id=7,
        run=2,
        namespace="vision",
        owner_id=42,
        owner_name="ada",
        name="explore",
        main=ContainerRequest(
            image="registry.example.com/nb:1", cpu_cores=Decimal("2"), memory_gib=Decimal("4")
        ),
        gpus=0,
        gpu_resource="nvidia.com/gpu",
        gpu_model="",
        max_lifetime_seconds=8 * 3600,
        home_gib=10,
    )
    values.update(changes)
    return SessionSpec(**values)


def test_a_cpu_session_runs_jupyterlab_under_its_path_with_the_home_volume_and_no_gpus():
    job = manifests.job_manifest(spec(), PLACEMENT)
    assert job["metadata"]["name"] == "session-7-2"
    assert job["metadata"]["labels"][SESSION_ID_LABEL] == "7"
    assert KUEUE_QUEUE_LABEL not in job["metadata"]["labels"]
    assert "suspend" not in job["spec"]
    assert job["spec"]["activeDeadlineSeconds"] == 8 * 3600
    assert job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]["spec"]
    assert "affinity" not in pod
    assert "tolerations" not in pod
    (server,) = pod["containers"]
    assert server["command"][:2] == ["jupyter", "lab"]
    assert "--ServerApp.base_url=/sessions/7/" in server["command"]
    assert server["resources"]["limits"] == {"cpu": "2000m", "memory": "4096Mi"}
    env = {item["name"]: item for item in server["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "void"
    assert env["JUPYTER_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "session-7-token",
        "key": "token",
    }
    assert server["readinessProbe"]["httpGet"]["path"] == "/sessions/7/api"
    assert server["volumeMounts"] == [{"name": "home", "mountPath": "/home/jovyan"}]
    assert pod["volumes"] == [{"name": "home", "persistentVolumeClaim": {"claimName": "home-42"}}]
    assert server["securityContext"]["allowPrivilegeEscalation"] is False


def test_the_token_is_in_a_secret_never_in_the_job():
    job = manifests.job_manifest(spec(), PLACEMENT)
    secret = manifests.token_secret_manifest(spec(), PLACEMENT, "s3cret-token")
    assert "s3cret-token" not in repr(job)
    assert secret["stringData"] == {"token": "s3cret-token"}
    assert secret["metadata"]["name"] == "session-7-token"


def test_a_gpu_session_goes_to_gpu_nodes_and_waits_in_the_guaranteed_queue():
    job = manifests.job_manifest(spec(gpus=1, gpu_model="A100", queue="guaranteed"), PLACEMENT)
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["labels"][KUEUE_QUEUE_LABEL] == "guaranteed"
    assert job["metadata"]["labels"][KUEUE_PRIORITY_CLASS_LABEL].endswith("guaranteed")
    pod = job["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    expressions = terms["nodeSelectorTerms"][0]["matchExpressions"]
    assert {"key": "hardware-type", "operator": "In", "values": ["gpu"]} in expressions
    assert {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["A100"]} in expressions
    assert pod["tolerations"][0]["operator"] == "Exists"
    server = pod["containers"][0]
    assert server["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert "NVIDIA_VISIBLE_DEVICES" not in {item["name"] for item in server["env"]}


def test_a_cpu_session_takes_the_configured_tolerations_and_node_selector():
    toleration = {"key": "gpuportal.io/real-node", "operator": "Exists", "effect": "NoSchedule"}
    job = manifests.job_manifest(
        spec(cpu_tolerations=(toleration,), cpu_node_selector={"pool": "cpu"}), PLACEMENT
    )
    pod = job["spec"]["template"]["spec"]
    assert pod["tolerations"] == [toleration]
    assert pod["nodeSelector"] == {"pool": "cpu"}


def test_the_home_claim_is_the_members_and_outlives_the_session():
    claim = manifests.home_claim_manifest(spec(storage_class="local-path"), PLACEMENT)
    assert claim["metadata"]["name"] == "home-42"
    assert claim["metadata"]["labels"][HOME_OWNER_LABEL] == "42"
    assert SESSION_ID_LABEL not in claim["metadata"]["labels"]
    assert "ownerReferences" not in claim["metadata"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    assert claim["spec"]["storageClassName"] == "local-path"
    assert "storageClassName" not in manifests.home_claim_manifest(spec(), PLACEMENT)["spec"]
