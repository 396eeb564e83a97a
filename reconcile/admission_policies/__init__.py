"""The ValidatingAdmissionPolicies (``admissionregistration.k8s.io/v1``) the portal installs on
each cluster, and their bindings to the namespaces it manages, as plain dicts. Pure functions:
no database, no network; ``reconcile.cluster_pass`` applies them. One module per policy
(``pods``, ``secrets``, ``jobs``, ``queued_templates``, ``services``, ``routes``), beside what
they share (``rules``, ``cel``, ``objects``, ``queues``, ``images``).

The portal's job checks (``gpujobs.admission``) refuse what these refuse, with a 400, before
anything reaches the cluster; these make the same rules hold for everything created in a team
namespace by anyone else (a member with kubectl, a controller acting for them):

``<portal>-team-pods``, on every pod created, and on every pod update that changes its spec:

* a pod asking for GPUs (any resource under ``GPU_RESOURCE_PREFIXES``) must be placed on GPU
  nodes, by a node selector or by a required node affinity every term of which holds the
  cluster's GPU node labels, and must tolerate the GPU taint; Kueue's admission, which adds
  its flavor's node selector and toleration to the pods of a Job it admits, keeps a pod within
  these rules;
* a pod asking for none must not tolerate the GPU taint (nor every taint, with an ``Exists``
  toleration without a key), so it stays off GPU nodes;
* no pod may set ``spec.nodeName`` (it would skip the scheduler, and with it affinity and
  taints);
* every image, of containers, init containers and ephemeral containers, must come from the
  cluster's allowed registries, read as the container runtime reads it
  (``clusters.image_references``, repeated here in CEL) — unless the cluster allows all;
* no container may set an ``NVIDIA_*`` variable (the device plugin sets
  ``NVIDIA_VISIBLE_DEVICES`` to the GPUs a container was given; with the default device-list
  strategy a pod setting it itself could see every GPU of its node), except
  ``NVIDIA_VISIBLE_DEVICES=void``, which hides every GPU and which the portal's CPU sidecar
  sets; ``envFrom`` needs a ``prefix`` that cannot begin an ``NVIDIA_`` name, since a
  ConfigMap or Secret could otherwise carry one past this rule;
* in a pod that asks for GPUs, every container that asks for none must set
  ``NVIDIA_VISIBLE_DEVICES=void``: on a GPU node a CUDA image's own ``NVIDIA_VISIBLE_DEVICES=all``
  would otherwise hand it every GPU of the node.

* no pod may name a ``priorityClassName`` outside the cluster's allowed list (empty by
  default: a ``system-*`` class would let a team's pods preempt anyone's);
* in Kueue mode, every pod that asks for GPUs is Kueue's: either a batch Job's pod, created by
  the Job controller (the Job itself held in the queue by ``<portal>-team-jobs``), or a
  pod Kueue's pod integration queued (labelled with one of the team's LocalQueues and held by
  Kueue's scheduling gate, which only Kueue may lift); its priority label, if any, is its
  queue's.

``<portal>-team-services``: Services stay inside the cluster (no NodePort or LoadBalancer type,
no externalIPs) unless a portal admin allowed the team otherwise (``Team.
external_services_allowed``, which the portal writes as a label on the team's namespaces).

``<portal>-team-routes``: Ingress hosts and HTTPRoute hostnames are under the team's own domain
(``<team>.<apps domain>``, the cluster's ``apps_domain``), never missing (a catch-all), no
Ingress default backend, no configuration-snippet annotations.

``<portal>-team-secrets``: no Secret of type ``kubernetes.io/service-account-token`` (a lasting
token for a service account, which Kubernetes fills in for whoever creates the Secret).

In Kueue mode only, two more keep every GPU workload in the team's queues:

``<portal>-team-jobs``, on every batch Job whose pods ask for GPUs: it names one of the
team's LocalQueues (``kueue.x-k8s.io/queue-name``), a priority label only of that queue, is
created suspended (Kueue's own webhook suspends it) and only Kueue un-suspends it, when it
admits it.

``<portal>-team-queued-templates``, on Deployments, StatefulSets, ReplicaSets and
ReplicationControllers whose pods ask for GPUs: the pod template names one of the team's
LocalQueues, so Kueue's pod integration queues each pod (and the pod rule above refuses it
otherwise, with the same words, when the controller tries to make it).

Why an admission policy rather than Kueue's ``manageJobsWithoutQueueName``: that setting would
queue every pod of a team namespace, those that ask for no GPU too, and a workload Kueue does
not integrate would still slip past; the policy refuses exactly the GPU work that bypasses the
queue, at the API server, with a message that says how to submit it.

Pod updates that leave the spec alone (labels, finalizers: the Job controller's, Kueue's) are
not checked, so a pod that was there before the policy never gets stuck.
"""

from __future__ import annotations

from reconcile import manifests
from reconcile.admission_policies.jobs import jobs_policy
from reconcile.admission_policies.objects import binding_object
from reconcile.admission_policies.pods import pods_policy
from reconcile.admission_policies.queued_templates import queued_templates_policy
from reconcile.admission_policies.routes import routes_policy
from reconcile.admission_policies.rules import ClusterRules
from reconcile.admission_policies.secrets import secrets_policy
from reconcile.admission_policies.services import services_policy


def admission_objects(rules: ClusterRules) -> list[dict]:
    """The policies and their bindings, each policy before its binding."""
    objects = []
    policies = [
        pods_policy(rules),
        secrets_policy(rules),
        jobs_policy(rules),
        services_policy(rules),
        routes_policy(rules),
    ]
    if rules.kueue:
        policies.append(queued_templates_policy(rules))
    for policy in policies:
        objects += [policy, binding_object(rules, policy["metadata"]["name"])]
    return [manifests.with_hash(obj) for obj in objects]
