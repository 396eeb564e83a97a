"""The reconcile sweep expires grants itself; its separate beat entry went with its task.

django-celery-beat's database scheduler keeps entries that settings no longer name, and would
keep sending the removed task every five minutes, so the stored entry is deleted here."""

from django.db import migrations

REMOVED_ENTRY = "expire-quota-grants"


def delete_entry(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(
        name=REMOVED_ENTRY
    ).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0002_team_cluster_reconcile_status"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(delete_entry, migrations.RunPython.noop)]
