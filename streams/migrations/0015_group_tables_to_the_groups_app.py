"""Reader groups' models leave the streams app for the groups app (issue 39), tables and all:
their tables stay as they are (`groups.models` names them), so this changes Django's state
only. It runs after the groups app took the models over (`groups` 0001) and after the one
foreign key from another app (an API key's group: `access` 0003) points there."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("groups", "0001_initial"),
        ("access", "0003_api_key_group_from_the_groups_app"),
        ("streams", "0014_handed_and_delivery_counts"),
    ]

    operations = [
        # the tables stay as they are (Meta.db_table): only Django's idea of whose models they are moves
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name="deliverycount",
                    name="position",
                ),
                migrations.RemoveField(
                    model_name="readergroup",
                    name="scope",
                ),
                migrations.RemoveField(
                    model_name="readergroup",
                    name="streams",
                ),
                migrations.RemoveField(
                    model_name="sample",
                    name="reader_group",
                ),
                migrations.RemoveField(
                    model_name="subscription",
                    name="reader_group",
                ),
                migrations.RemoveField(
                    model_name="readposition",
                    name="subscription",
                ),
                migrations.RemoveField(
                    model_name="sample",
                    name="stream",
                ),
                migrations.RemoveField(
                    model_name="subscription",
                    name="stream",
                ),
                migrations.DeleteModel(
                    name="Checkpoint",
                ),
                migrations.DeleteModel(
                    name="DeliveryCount",
                ),
                migrations.DeleteModel(
                    name="ReaderGroup",
                ),
                migrations.DeleteModel(
                    name="ReadPosition",
                ),
                migrations.DeleteModel(
                    name="Sample",
                ),
                migrations.DeleteModel(
                    name="Subscription",
                ),
            ],
        ),
    ]
