"""Register a cluster from the command line, as an admin does in the Django admin ("Clusters"):
the scripted end of an install, e.g. right after `helm install`::

    kubectl -n gpu-portal exec deploy/portal-gpu-portal-web -- \\
        python manage.py register_cluster production --display-name "Production" \\
        --allowed-registry registry.example.com

Without ``--kubeconfig`` the portal reaches the cluster it runs in with its ServiceAccount. The
new cluster gets its admission policies from the first reconcile, as one added in the admin
does, and its GPU capacity is read at once (then by the periodic inventory sync). Every other
setting keeps its default; change it in the admin afterwards.
"""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from clusters.capacity import capacity_sync
from clusters.kube import KubeError
from clusters.models import Cluster
from clusters.signals import settings_changed

# The option that sets a field, where its name is not the field's.
OPTIONS = {"kubeconfig_path": "kubeconfig", "allowed_registries": "allowed-registry"}


class Command(BaseCommand):
    help = "Register a Kubernetes cluster the portal hands out GPU quota on."

    def add_arguments(self, parser):
        parser.add_argument("name", help="The cluster's name (a DNS label, e.g. production).")
        parser.add_argument("--display-name", default="", help="How pages name it.")
        parser.add_argument(
            "--kubeconfig",
            default="",
            help="Path of a kubeconfig inside the portal's pods; empty: the cluster the portal "
            "runs in, with its ServiceAccount.",
        )
        parser.add_argument(
            "--api-server-url", default="", help="Overrides the kubeconfig's API server."
        )
        parser.add_argument("--prometheus-url", default="", help="Where its DCGM metrics are.")
        parser.add_argument(
            "--gpu-node-selector",
            action="append",
            metavar="LABEL=VALUE",
            help="A label every GPU node carries (repeat for several; default hardware-type=gpu).",
        )
        parser.add_argument(
            "--gpu-taint-key", help="The taint on its GPU nodes (default nvidia.com/gpu)."
        )
        parser.add_argument(
            "--allowed-registry",
            action="append",
            default=[],
            metavar="REGISTRY",
            help="A registry team workloads may pull from (repeat for several; default none).",
        )

    def handle(self, *args, **options):
        name = options["name"]
        if Cluster.objects.filter(name=name).exists():
            raise CommandError(
                f"name: a cluster named {name!r} is registered already; change its settings "
                "in the Django admin (Clusters)."
            )
        cluster = Cluster(
            name=name,
            display_name=options["display_name"],
            kubeconfig_path=options["kubeconfig"],
            api_server_url=options["api_server_url"],
            prometheus_url=options["prometheus_url"],
            allowed_registries=options["allowed_registry"],
        )
        if options["gpu_node_selector"]:
            cluster.gpu_node_selector = _labels(options["gpu_node_selector"])
        if options["gpu_taint_key"]:
            cluster.gpu_taint_key = options["gpu_taint_key"]
        try:
            cluster.full_clean()
        except ValidationError as error:
            raise CommandError(
                "; ".join(
                    f"{OPTIONS.get(field, field.replace('_', '-'))}: {' '.join(messages)}"
                    for field, messages in error.message_dict.items()
                )
            ) from error
        with transaction.atomic():
            cluster.save()
            settings_changed.send(sender=Cluster, cluster=cluster, before=None, actor=None)
        self.stdout.write(f"Cluster {name} registered.")
        try:
            capacity_sync(cluster=cluster)
        except KubeError as error:
            self.stdout.write(
                f"Its GPUs could not be read yet ({error}); the inventory sync tries again."
            )
            return
        found = [f"{row.allocatable} {row.resource_name}" for row in cluster.gpu_capacities.all()]
        self.stdout.write("GPUs found: " + (", ".join(found) if found else "none"))


def _labels(pairs: list[str]) -> dict[str, str]:
    labels = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise CommandError(f"gpu-node-selector: {pair!r} is not LABEL=VALUE.")
        labels[key] = value
    return labels
