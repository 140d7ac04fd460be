from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("groups", "0005_tags"),
    ]

    operations = [
        migrations.AddField(
            model_name="readergroup",
            name="dispatch_rate",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
