from django.db import migrations


def inherit_policy_where_none(apps, schema_editor):
    """A stream made before scopes had defaults and without a retention policy set none of its
    own: it takes its scope's default policy once the scope has one. Its other settings were
    its own (they count as set, if only by their defaults, before any scope default existed)."""
    Stream = apps.get_model("streams", "Stream")
    Policy = apps.get_model("retention", "RetentionPolicy")
    with_policy = Policy.objects.values_list("stream_id", flat=True)
    Stream.objects.exclude(pk__in=with_policy).update(inherited=["retention_policy"])


class Migration(migrations.Migration):
    dependencies = [
        ("retention", "0011_cycle_runner"),
        ("streams", "0012_scope_defaults"),
    ]

    operations = [migrations.RunPython(inherit_policy_where_none, migrations.RunPython.noop)]
