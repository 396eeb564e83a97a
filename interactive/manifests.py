"""A session as the objects its cluster holds: pure builders on a ``SessionSpec`` and the
cluster's placement rules. ``stored_session_spec`` reads a session's rows and the settings.

* The member's home volume: a PersistentVolumeClaim ``home-<user id>`` in the team's namespace,
  of the size the member chose first, on the configured StorageClass (the cluster's default when
  none is set); it outlives every session, so it carries no owner reference.
* The token Secret ``session-<id>-token``: the token the notebook server asks every request for.
  The portal's proxy adds it; a Secret keeps it out of the Job, which the team's viewers can
  read.
* One ``batch/v1`` Job per run, ``session-<id>-<run>``: one pod, never restarted
  (``backoffLimit`` 0), ended by the cluster at the session's maximum lifetime
  (``activeDeadlineSeconds``). Its container runs JupyterLab under ``/sessions/<id>/`` (the
  path the portal proxies) on ``SESSIONS_SERVER_PORT``, with the home volume at
  ``/home/jovyan`` and a readiness probe on the server's unauthenticated ``api`` path. Any image
  with JupyterLab 4 on its ``PATH`` runs.
* A GPU session's pod goes where every GPU pod goes (``workloads.manifests``): the GPU node
  affinity and toleration, and in Kueue mode the team's guaranteed LocalQueue, suspended until
  Kueue admits it; a session is interactive, so it is never opportunistic work another team's
  job may preempt. A CPU session's pod has its GPUs hidden and goes where the settings say.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.conf import settings

from clusters.vocabulary import (
    GUARANTEED,
    HOME_OWNER_LABEL,
    MANAGED_BY_LABEL,
    SESSION_ID_LABEL,
    SUBMITTED_BY_ANNOTATION,
    TEAM_LABEL,
)
from interactive.models import home_claim_name
from workloads.manifests import (
    Placement,
    container,
    gpu_node_affinity,
    gpu_toleration,
    hide_gpus,
    kueue_labels,
    pod_security_context,
)
from workloads.specs import ContainerRequest

if TYPE_CHECKING:
    from interactive.models import InteractiveSession

JOB_NAME_PREFIX = "session-"
SERVER_CONTAINER = "notebook"
HOME_VOLUME = "home"
HOME_PATH = "/home/jovyan"
TOKEN_KEY = "token"
TOKEN_ENV = "JUPYTER_TOKEN"
# The group of the Jupyter images' user (``users``): the home volume is made writable for it.
HOME_GROUP_ID = 100


@dataclass(frozen=True)
class SessionSpec:
    """A session's run as the builders take it."""

    session_id: int
    run: int
    namespace: str
    owner_id: int
    owner_name: str
    name: str
    main: ContainerRequest
    gpus: int
    gpu_resource: str
    gpu_model: str
    max_lifetime_seconds: int
    home_gib: int
    queue: str = ""
    port: int = 8888
    image_pull_policy: str = "IfNotPresent"
    storage_class: str = ""
    cpu_tolerations: tuple[dict, ...] = ()
    cpu_node_selector: dict[str, str] = field(default_factory=dict)


def job_name(session_id: int, run: int) -> str:
    return f"{JOB_NAME_PREFIX}{session_id}-{run}"


def token_secret_name(session_id: int) -> str:
    return f"{JOB_NAME_PREFIX}{session_id}-token"


def base_path(session_id: int) -> str:
    """Where the portal serves the session's server, and where the server thinks it lives."""
    return f"/sessions/{session_id}/"


def ownership_selector(portal_name: str) -> str:
    """Every Job and pod of every session the portal made, in every namespace."""
    return f"{MANAGED_BY_LABEL}={portal_name},{SESSION_ID_LABEL}"


def _labels(spec: SessionSpec, placement: Placement) -> dict[str, str]:
    return {
        MANAGED_BY_LABEL: placement.portal_name,
        TEAM_LABEL: spec.namespace,
        SESSION_ID_LABEL: str(spec.session_id),
    }


def home_claim_manifest(spec: SessionSpec, placement: Placement) -> dict:
    claim_spec: dict = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": f"{spec.home_gib}Gi"}},
    }
    if spec.storage_class:
        claim_spec["storageClassName"] = spec.storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": home_claim_name(spec.owner_id),
            "namespace": spec.namespace,
            "labels": {
                MANAGED_BY_LABEL: placement.portal_name,
                TEAM_LABEL: spec.namespace,
                HOME_OWNER_LABEL: str(spec.owner_id),
            },
            "annotations": {SUBMITTED_BY_ANNOTATION: spec.owner_name},
        },
        "spec": claim_spec,
    }


def token_secret_manifest(spec: SessionSpec, placement: Placement, token: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": token_secret_name(spec.session_id),
            "namespace": spec.namespace,
            "labels": _labels(spec, placement),
        },
        "stringData": {TOKEN_KEY: token},
    }


def server_arguments(spec: SessionSpec) -> list[str]:
    """JupyterLab under the session's path, answering anyone with the token (the proxy): the
    Host it sees is the pod's address, and the proxy says who the client was."""
    return [
        "jupyter",
        "lab",
        "--ip=0.0.0.0",
        f"--port={spec.port}",
        "--no-browser",
        f"--ServerApp.base_url={base_path(spec.session_id)}",
        f"--ServerApp.root_dir={HOME_PATH}",
        "--ServerApp.allow_remote_access=True",
        "--ServerApp.trust_xheaders=True",
    ]


def server_container(spec: SessionSpec) -> dict:
    gpus = {spec.gpu_resource: str(spec.gpus)} if spec.gpus else None
    env = (*spec.main.env, ("NB_PREFIX", base_path(spec.session_id).rstrip("/")))
    if not spec.gpus:
        env = hide_gpus(env)
    request = ContainerRequest(
        image=spec.main.image,
        command=tuple(server_arguments(spec)),
        cpu_cores=spec.main.cpu_cores,
        memory_gib=spec.main.memory_gib,
    )
    manifest = container(SERVER_CONTAINER, request, gpus=gpus, env=env)
    manifest["env"].append(
        {
            "name": TOKEN_ENV,
            "valueFrom": {
                "secretKeyRef": {"name": token_secret_name(spec.session_id), "key": TOKEN_KEY}
            },
        }
    )
    manifest["imagePullPolicy"] = spec.image_pull_policy
    manifest["ports"] = [{"name": "http", "containerPort": spec.port}]
    manifest["volumeMounts"] = [{"name": HOME_VOLUME, "mountPath": HOME_PATH}]
    manifest["readinessProbe"] = {
        "httpGet": {"path": f"{base_path(spec.session_id)}api", "port": spec.port},
        "periodSeconds": 2,
        "failureThreshold": 3,
    }
    return manifest


def job_manifest(spec: SessionSpec, placement: Placement) -> dict:
    labels = _labels(spec, placement)
    pod_spec: dict = {
        "restartPolicy": "Never",
        "containers": [server_container(spec)],
        "volumes": [
            {
                "name": HOME_VOLUME,
                "persistentVolumeClaim": {"claimName": home_claim_name(spec.owner_id)},
            }
        ],
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {**pod_security_context(placement), "fsGroup": HOME_GROUP_ID},
    }
    queue = ""
    if spec.gpus:
        pod_spec["affinity"] = gpu_node_affinity(spec.gpu_model, placement)
        pod_spec["tolerations"] = [gpu_toleration(placement)]
        queue = spec.queue
    else:
        if spec.cpu_tolerations:
            pod_spec["tolerations"] = [dict(t) for t in spec.cpu_tolerations]
        if spec.cpu_node_selector:
            pod_spec["nodeSelector"] = dict(spec.cpu_node_selector)
    job_spec: dict = {
        "completions": 1,
        "parallelism": 1,
        "backoffLimit": 0,
        "activeDeadlineSeconds": spec.max_lifetime_seconds,
        "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec},
    }
    if queue:
        job_spec["suspend"] = True  # Kueue un-suspends it when it admits it
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(spec.session_id, spec.run),
            "namespace": spec.namespace,
            "labels": {
                **labels,
                **kueue_labels(queue=queue, priority=GUARANTEED, portal_name=placement.portal_name),
            },
            "annotations": {SUBMITTED_BY_ANNOTATION: spec.owner_name},
        },
        "spec": job_spec,
    }


def stored_session_spec(session: InteractiveSession, *, home_gib: int) -> SessionSpec:
    """The spec of a stored session's current run (reads its team and owner)."""
    return SessionSpec(
        session_id=session.pk,
        run=session.run,
        namespace=session.team.slug,
        owner_id=session.owner_id,
        owner_name=session.owner.get_username(),
        name=session.name,
        main=ContainerRequest(
            image=session.image, cpu_cores=session.cpu_cores, memory_gib=session.memory_gib
        ),
        gpus=session.gpus,
        gpu_resource=session.gpu_resource,
        gpu_model=session.gpu_model,
        max_lifetime_seconds=session.max_lifetime_seconds,
        home_gib=home_gib,
        queue=session.queue_name,
        port=settings.SESSIONS_SERVER_PORT,
        image_pull_policy=settings.SESSIONS_IMAGE_PULL_POLICY,
        storage_class=settings.SESSIONS_STORAGE_CLASS,
        cpu_tolerations=tuple(settings.SESSIONS_CPU_TOLERATIONS),
        cpu_node_selector=dict(settings.SESSIONS_CPU_NODE_SELECTOR),
    )
