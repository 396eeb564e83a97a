"""Tenant isolation on the devcluster: Pod Security, the portal's admission policies, access
that follows membership, the portal's own confinement, reserved namespaces, the default
NetworkPolicy.

These tests run a portal of their own name (``isolated_portal``): its admission policies are
bound to the namespaces labelled with that name only, so they never touch what other test
sessions do on the shared devcluster. Its worker acts with deploy/rbac.yaml's role for that
name (deploy/team-roles.yaml installed beside it) and is confined by
deploy/portal-confinement.yaml, as a cluster admin installs them: every test here runs the
real worker as the portal's least-privilege, confined identity. Members act with credentials
minted for them (``member``); what the cluster holds is read with the admin's client.
"""

from __future__ import annotations

import datetime
import json
import uuid
from dataclasses import dataclass

import pytest
from django.test.utils import override_settings
from django.utils import timezone
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from portal.celery import app as celery_app
from tenants import quota, services
from tenants.models import ClusterState, Membership
from tests import factories
from tests.integration.conftest import wait_for
from tests.integration.kube import read_or_none, remove_admission_objects
from tests.integration.kueue_portal import KueueObjects
from tests.integration.portal_identity import (
    confine,
    mint_portal_identity,
    portal_identity_name,
    unconfine,
)
from tests.integration.reconcile.conftest import (  # noqa: F401 (fixtures)
    KueuePortal,
    Worker,
    admin_user,
    in_sync,
    make_team,
    route_reconciles,
)

PORTAL_USER = "gpu-portal-isolation-tests"
ALLOWED_REGISTRIES = ["registry.example.com", "docker.io/library"]
IMAGE = "registry.example.com/ml/trainer:1.0"


@dataclass
class IsolatedPortal(KueuePortal):
    """A portal of its own name, with the minted user name of its confined identity."""

    identity: str = ""


def route_job_tasks(monkeypatch, queue: str) -> None:
    """Send the GPU job tasks to ``queue`` too."""
    from gpujobs.tasks import delete_job, submit_job

    for task in (submit_job._get_current_object(), delete_job._get_current_object()):
        monkeypatch.setattr(task, "queue", queue, raising=False)
        monkeypatch.setattr(task, "_exec_options", None)


@pytest.fixture(scope="package")
def isolated_portal(postgres_database, devcluster, k8s, tmp_path_factory):
    name = f"iso-{uuid.uuid4().hex[:6]}"
    queue = f"isolation-test-{name}"
    kubeconfig = mint_portal_identity(devcluster, k8s, user=PORTAL_USER, portal_name=name)
    identity = portal_identity_name(user=PORTAL_USER, portal_name=name)
    confinement = confine(k8s, user=identity, portal_name=name)
    patches = pytest.MonkeyPatch()
    route_reconciles(patches, queue)
    route_job_tasks(patches, queue)
    with override_settings(PORTAL_NAME=name):
        worker = Worker(
            queue=queue,
            log=tmp_path_factory.mktemp("isolation-worker") / "worker.log",
            # What the worker itself enqueues stays on its queue, under its portal name.
            env={"PORTAL_NAME": name, "CELERY_TASK_DEFAULT_QUEUE": queue},
        )
        worker.wait_ready()
        portal = IsolatedPortal(
            name=name,
            queue=queue,
            worker=worker,
            objects=KueueObjects(k8s, name),
            kubeconfig=kubeconfig,
            identity=identity,
        )
        try:
            yield portal
        finally:
            worker.stop()
            patches.undo()
            with celery_app.connection_for_write() as connection:
                connection.default_channel.queue_delete(queue)
            portal.objects.remove_everything()
            remove_admission_objects(k8s, name)
            unconfine(k8s, confinement)


@pytest.fixture
def portal(transactional_db, isolated_portal):
    """The isolated portal, its worker idle again after the test (before its rows go)."""
    yield isolated_portal
    isolated_portal.wait_idle()


@pytest.fixture
def iso_cluster(portal):
    """The devcluster as this portal knows it: 32 A100s to plan with, images from
    registry.example.com and Docker Hub's official images only, baseline Pod Security."""
    cluster = factories.ClusterFactory(
        name="dev",
        display_name="Devcluster",
        kubeconfig_path=str(portal.kubeconfig),
        allowed_registries=list(ALLOWED_REGISTRIES),
        allow_all_registries=False,
    )
    factories.GpuCapacityFactory(cluster=cluster, allocatable=32)
    return cluster


def wait_for_quota_status(core, portal_name: str, namespace: str) -> None:
    """Pods are admitted against a quota only once the controller has counted its usage."""
    wait_for(
        lambda: (
            (
                q := read_or_none(
                    core.read_namespaced_resource_quota, f"{portal_name}-quota", namespace
                )
            )
            is not None
            and q.status is not None
            and q.status.used is not None
            and q.status.hard == q.spec.hard
        ),
        timeout=60,
        what=f"the quota controller to count usage in {namespace}",
    )


@pytest.fixture
def onboard(admin_user, core, portal):  # noqa: F811 (admin_user: the imported fixture)
    """``onboard(team, cluster, lead=..., members=[...], viewers=[...])``: the team's
    memberships set and a grant approved through the services, as an admin does; returns once
    the team's namespace is in sync (its members bound) and takes pods (its default service
    account made, its quota counted)."""

    def run(team, cluster, *, gpus: int = 4, lead: str, members=(), viewers=()):
        people = [(lead, Membership.Role.LEAD)]
        people += [(name, Membership.Role.MEMBER) for name in members]
        people += [(name, Membership.Role.VIEWER) for name in viewers]
        users = {}
        for username, role in people:
            users[username] = factories.UserFactory(username=username)
            services.membership_set(actor=admin_user, team=team, user=users[username], role=role)
        quota_request = quota.quota_request_create(
            requested_by=users[lead],
            team=team,
            cluster=cluster,
            gpus=gpus,
            justification="Isolation tests.",
            ends_on=timezone.localdate() + datetime.timedelta(days=30),
        )
        quota.quota_request_approve(reviewer=admin_user, quota_request=quota_request)
        wait_for(
            lambda: ClusterState.objects.filter(
                cluster=cluster, admission_applied_at__isnull=False
            ).exists(),
            timeout=60,
            what="the cluster's admission policies",
        )
        in_sync(team, cluster, timeout=90)
        wait_for(
            lambda: read_or_none(core.read_namespaced_service_account, "default", team.slug),
            what=f"the default service account in {team.slug}",
        )
        wait_for_quota_status(core, portal.name, team.slug)
        return users

    return run


@pytest.fixture
def member(devcluster):
    """``member("portal:lena")``: an ApiClient with credentials minted for that identity."""
    clients = []

    def make(identity: str, groups=()) -> client.ApiClient:
        api = config.new_client_from_config(config_file=str(devcluster.mint(identity, groups)))
        clients.append(api)
        return api

    yield make
    for api in clients:
        api.close()


@pytest.fixture
def portal_api(portal):
    """The portal's own (confined) credentials, as its worker has them."""
    api = config.new_client_from_config(config_file=str(portal.kubeconfig))
    yield api
    api.close()


def refusal(call, *args, **kwargs) -> tuple[int, str]:
    """(status, message) of the API server's refusal of ``call``; fails the test if it is
    accepted."""
    try:
        call(*args, **kwargs)
    except ApiException as error:
        try:
            return error.status, json.loads(error.body)["message"]
        except (TypeError, ValueError, KeyError):
            return error.status, error.body or ""
    pytest.fail(f"{getattr(call, '__name__', call)} was accepted")


def cpu_pod(name: str, image: str = IMAGE, **spec) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": image}],
            **spec,
        },
    }
