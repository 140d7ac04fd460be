"""Random names for the Redis state of reader groups and subscriptions (see their `state_key`):
added empty, filled one by one, then made unique."""

import uuid

from django.db import migrations, models

import streams.models


def fill(apps, schema_editor):
    for model in ("ReaderGroup", "Subscription"):
        rows = apps.get_model("streams", model).objects
        for pk in rows.filter(state_key__isnull=True).values_list("pk", flat=True).iterator():
            rows.filter(pk=pk).update(state_key=uuid.uuid4().hex)


class Migration(migrations.Migration):
    dependencies = [
        ("streams", "0007_read_compacted"),
    ]

    operations = [
        migrations.AddField(
            model_name="readergroup",
            name="state_key",
            field=models.CharField(max_length=32, null=True, editable=False),
        ),
        migrations.AddField(
            model_name="subscription",
            name="state_key",
            field=models.CharField(max_length=32, null=True, editable=False),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="readergroup",
            name="state_key",
            field=models.CharField(default=streams.models.new_storage_key, editable=False, max_length=32, unique=True),
        ),
        migrations.AlterField(
            model_name="subscription",
            name="state_key",
            field=models.CharField(default=streams.models.new_storage_key, editable=False, max_length=32, unique=True),
        ),
    ]
