"""Every subscription gets its read positions (made with the subscription from now on): a
segment's floor starts at the group's acknowledgement cut (the first read raises it to the
head if retention has passed it)."""

from django.db import migrations


def make_positions(apps, schema_editor):
    Subscription = apps.get_model("streams", "Subscription")
    ReadPosition = apps.get_model("streams", "ReadPosition")
    have = set(ReadPosition.objects.values_list("subscription_id", "segment_id"))
    rows = []
    for sub in Subscription.objects.select_related("stream"):
        cut = sub.acknowledgement_cut or {}
        for i in range(sub.stream.segment_count):
            seg = str(i)
            if (sub.pk, seg) not in have:
                rows.append(ReadPosition(subscription_id=sub.pk, segment_id=seg, floor=int(cut.get(seg, 0))))
    ReadPosition.objects.bulk_create(rows, batch_size=1000)


class Migration(migrations.Migration):
    dependencies = [("streams", "0003_read_positions")]
    operations = [migrations.RunPython(make_positions, migrations.RunPython.noop)]
