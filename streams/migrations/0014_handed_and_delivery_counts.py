"""An ack carried across a seek, and delivery counts that survive Redis: a subscription's
`former_incarnations`, and `ReadPosition.handed` (every offset from the floor up to it
was handed out at least once) and `DeliveryCount` (the highest count of offsets handed out more
than once). Existing positions start with `handed` at their floor: what was handed out above it
before this release counts as never handed out if Redis loses it, as it did before."""

import django.db.models.deletion
from django.db import migrations, models


def handed_from_floor(apps, schema_editor):
    ReadPosition = apps.get_model("streams", "ReadPosition")
    ReadPosition.objects.update(handed=models.F("floor"))


class Migration(migrations.Migration):
    dependencies = [("streams", "0013_samples")]

    operations = [
        migrations.AddField(
            model_name="subscription",
            name="former_incarnations",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(model_name="readposition", name="handed", field=models.BigIntegerField(default=0)),
        migrations.RunPython(handed_from_floor, migrations.RunPython.noop),
        migrations.CreateModel(
            name="DeliveryCount",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("offset", models.BigIntegerField()),
                ("count", models.IntegerField()),
                (
                    "position",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="delivery_counts",
                        to="streams.readposition",
                    ),
                ),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("position", "offset"), name="delivery_count_unique")]
            },
        ),
    ]
