"""An API key's reader group is the groups app's model now (issue 39); the column and its foreign
key stay as they are (the table `streams_readergroup` did not move), so this changes Django's
state only."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("access", "0002_role_groups"),
        ("groups", "0001_initial"),
    ]

    operations = [
        # the column and its foreign key stay as they are: only the model it names moves
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="apikey",
                    name="reader_group",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="api_keys",
                        to="groups.readergroup",
                    ),
                ),
            ],
        ),
    ]
