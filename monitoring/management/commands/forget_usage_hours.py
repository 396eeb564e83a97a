"""``python manage.py forget_usage_hours [--cluster NAME ...]``: measure the usage report's
GPU-hours afresh, after history was written into periods the portal had already measured (a
``promtool`` backfill into a cluster's Prometheus). See ``monitoring.measured_hours``."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from clusters.models import Cluster
from monitoring.measured_hours import forget_kept_hours
from monitoring.metrics import prometheus_for

LOCAL_MEMORY = "django.core.cache.backends.locmem.LocMemCache"


class Command(BaseCommand):
    help = (
        "Forget the GPU-hours the usage report keeps for each cluster's Prometheus (every "
        "cluster, or those named), so that the next report measures them again."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--cluster", action="append", default=[], metavar="NAME", help="only this cluster"
        )

    def handle(self, *args, **options):
        if settings.CACHES["default"]["BACKEND"] == LOCAL_MEMORY:
            raise CommandError(
                "The cache is each process's own memory (no DJANGO_CACHE_URL): this command "
                "cannot reach the portal's. Restart the portal's processes instead."
            )
        clusters = Cluster.objects.order_by("name")
        names = options["cluster"]
        if names:
            clusters = clusters.filter(name__in=names)
            unknown = sorted(set(names) - {c.name for c in clusters})
            if unknown:
                raise CommandError(f"No cluster named {', '.join(unknown)}.")
        for cluster in clusters:
            if not cluster.prometheus_url:
                self.stdout.write(f"{cluster.name}: no Prometheus; nothing kept")
                continue
            with prometheus_for(cluster) as prometheus:
                forget_kept_hours(prometheus)
            self.stdout.write(f"{cluster.name}: usage hours will be measured afresh")
