"""deploy/rbac.yaml lets the portal run GPU jobs (create and delete Jobs; follow Jobs, pods and
events; read logs) and no more: it never creates or changes pods, nor execs into them.
Every cluster test of jobs runs with exactly these credentials."""

import pytest
from kubernetes import client, config

pytestmark = [pytest.mark.devcluster]


@pytest.fixture(scope="module")
def portal_api(portal_kubeconfig):
    api = config.new_client_from_config(config_file=str(portal_kubeconfig))
    yield api
    api.close()


def allowed(api, verb, resource, *, group="", subresource="", namespace=None) -> bool:
    review = client.AuthorizationV1Api(api).create_self_subject_access_review(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "verb": verb,
                    "resource": resource,
                    "group": group,
                    "subresource": subresource,
                    "namespace": namespace,
                }
            },
        }
    )
    return review.status.allowed


@pytest.mark.parametrize(
    ("verb", "resource", "group", "subresource", "namespace"),
    [
        ("create", "jobs", "batch", "", "any-team"),
        ("delete", "jobs", "batch", "", "any-team"),
        ("watch", "jobs", "batch", "", None),
        ("list", "pods", "", "", None),
        ("watch", "pods", "", "", None),
        ("watch", "events", "", "", None),
        ("get", "pods", "", "log", "any-team"),
    ],
)
def test_the_portal_may_do_what_gpu_jobs_need(
    portal_api, verb, resource, group, subresource, namespace
):
    assert allowed(portal_api, verb, resource, group=group, subresource=subresource,
                   namespace=namespace)  # fmt: skip


@pytest.mark.parametrize(
    ("verb", "resource", "group", "subresource"),
    [
        ("create", "pods", "", ""),
        ("patch", "pods", "", ""),
        ("create", "pods", "", "exec"),
        ("create", "pods", "", "attach"),
        ("update", "jobs", "batch", ""),
        ("patch", "jobs", "batch", ""),
        ("create", "cronjobs", "batch", ""),
        ("create", "events", "", ""),
    ],
)
def test_the_portal_may_not_do_more_with_workloads(portal_api, verb, resource, group, subresource):
    assert not allowed(portal_api, verb, resource, group=group, subresource=subresource,
                       namespace="any-team")  # fmt: skip
