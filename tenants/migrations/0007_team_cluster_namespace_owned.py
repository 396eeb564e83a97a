from django.db import migrations, models


def record_what_the_last_passes_found(apps, schema_editor):
    """A pass that ended in sync found or made the namespace the portal's; for the others the
    next pass (at most one sweep away) says."""
    TeamCluster = apps.get_model("tenants", "TeamCluster")
    TeamCluster.objects.filter(status="in_sync").update(namespace_owned=True)


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0006_kueue_cluster_state_and_queue_audit"),
    ]

    operations = [
        migrations.AddField(
            model_name="teamcluster",
            name="namespace_owned",
            field=models.BooleanField(
                blank=True,
                help_text="What the last reconcile found of the team's namespace: the portal's "
                "(made or found with its labels), someone else's (never touched, no metrics "
                "shown from it), or empty: not looked at yet, or deleted since.",
                null=True,
            ),
        ),
        migrations.RunPython(record_what_the_last_passes_found, migrations.RunPython.noop),
    ]
