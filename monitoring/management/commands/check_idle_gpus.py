"""``python manage.py check_idle_gpus``: one idle-GPU check now, as Celery beat runs it every
minute (``monitoring.tasks.check_idle_gpus``). The demo runs it once at start, so that the idle
pod of its GPU history has its leads notified before anyone opens the portal."""

from django.core.management.base import BaseCommand

from monitoring import idle


class Command(BaseCommand):
    help = "Find idle GPUs on every cluster with a Prometheus now: notify, warn and stop."

    def handle(self, *args, **options):
        for result in idle.idle_check():
            if result.error:
                self.stderr.write(f"{result.cluster}: not checked: {result.error}")
                continue
            self.stdout.write(
                f"{result.cluster}: {len(result.idle)} idle pod(s) "
                f"({', '.join(result.idle) or 'none'}), {len(result.notified)} newly notified, "
                f"{len(result.stopped)} stopped"
            )
