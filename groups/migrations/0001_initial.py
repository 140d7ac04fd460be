"""Reader groups' models, moved from the streams app (issue 39) with their tables: every table
here is the one `streams` made (`streams_readergroup`, `streams_subscription`,
`streams_readposition`, `streams_deliverycount`, `streams_checkpoint`, `streams_sample`), so
this migration changes Django's state only, never the database. The content types of the moved
models are relabelled, so that permissions and admin history given to them stay theirs."""

import django.db.models.deletion
from django.db import migrations, models

import streams.models

MOVED = ("readergroup", "subscription", "readposition", "deliverycount", "checkpoint", "sample")


def _relabel(apps, source: str, target: str) -> None:
    """The moved models' content types (made by an installation that ran before the move) take
    the new app's label; a fresh database has none yet (they are made after migrating)."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not ContentType.objects.filter(app_label=target, model=model).exists():
            ContentType.objects.filter(app_label=source, model=model).update(app_label=target)


def relabel_content_types(apps, schema_editor):
    _relabel(apps, "streams", "groups")


def relabel_content_types_back(apps, schema_editor):
    _relabel(apps, "groups", "streams")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("streams", "0014_handed_and_delivery_counts"),
    ]

    operations = [
        # the tables stay as they are (Meta.db_table): only Django's idea of whose models they are moves
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ReaderGroup",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("name", models.CharField(max_length=128)),
                        (
                            "state_key",
                            models.CharField(
                                default=streams.models.new_storage_key, editable=False, max_length=32, unique=True
                            ),
                        ),
                        (
                            "retention_type",
                            models.CharField(
                                choices=[
                                    ("NONE", "None"),
                                    ("MANUAL_RELEASE_AT_USER_STREAMCUT", "Manual Release At User Streamcut"),
                                    ("AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT", "Automatic Release At Last Checkpoint"),
                                ],
                                default="NONE",
                                max_length=40,
                            ),
                        ),
                        (
                            "start",
                            models.CharField(
                                choices=[
                                    ("head", "Head"),
                                    ("tail", "Tail"),
                                    ("time", "Time"),
                                    ("stream_cuts", "Stream Cuts"),
                                ],
                                default="head",
                                max_length=16,
                            ),
                        ),
                        ("start_at", models.JSONField(blank=True, null=True)),
                        ("end_stream_cuts", models.JSONField(blank=True, default=dict)),
                        ("sinks", models.JSONField(blank=True, default=list)),
                        ("ack_timeout_s", models.PositiveIntegerField(default=30)),
                        ("max_deliveries", models.PositiveIntegerField(default=5)),
                        (
                            "on_poison",
                            models.CharField(
                                choices=[("dead_letter", "Dead Letter"), ("skip", "Skip"), ("halt", "Halt")],
                                default="dead_letter",
                                max_length=16,
                            ),
                        ),
                        ("max_ack_pending", models.PositiveIntegerField(default=1000)),
                        ("checkpoint_interval_s", models.PositiveIntegerField(blank=True, null=True)),
                        ("read_compacted", models.BooleanField(default=False)),
                        ("backoff_s", models.JSONField(blank=True, default=list)),
                        (
                            "ack_policy",
                            models.CharField(
                                choices=[("explicit", "Explicit"), ("none", "None")], default="explicit", max_length=16
                            ),
                        ),
                        ("last_checkpoint_at", models.DateTimeField(blank=True, null=True)),
                        ("generation", models.PositiveBigIntegerField(default=0)),
                        ("removed_streams", models.JSONField(blank=True, default=list)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "scope",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="reader_groups",
                                to="streams.scope",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "streams_readergroup",
                        "ordering": ["scope__name", "name"],
                    },
                ),
                migrations.CreateModel(
                    name="Subscription",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "state_key",
                            models.CharField(
                                default=streams.models.new_storage_key, editable=False, max_length=32, unique=True
                            ),
                        ),
                        ("former_incarnations", models.JSONField(blank=True, default=list)),
                        ("acknowledgement_cut", models.JSONField(blank=True, null=True)),
                        ("acknowledgement_sizes", models.JSONField(blank=True, null=True)),
                        ("acknowledged_at", models.DateTimeField(blank=True, null=True)),
                        ("end_cut", models.JSONField(blank=True, null=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "reader_group",
                            models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to="groups.readergroup"),
                        ),
                        (
                            "stream",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="subscriptions",
                                to="streams.stream",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "streams_subscription",
                    },
                ),
                migrations.CreateModel(
                    name="ReadPosition",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("segment_id", models.CharField(max_length=64)),
                        ("floor", models.BigIntegerField(default=0)),
                        ("missed", models.BigIntegerField(default=0)),
                        ("handed", models.BigIntegerField(default=0)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "subscription",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="positions",
                                to="groups.subscription",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "streams_readposition",
                        "ordering": ["subscription_id", "segment_id"],
                    },
                ),
                migrations.AddField(
                    model_name="readergroup",
                    name="streams",
                    field=models.ManyToManyField(
                        related_name="reader_groups", through="groups.Subscription", to="streams.stream"
                    ),
                ),
                migrations.CreateModel(
                    name="Checkpoint",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("name", models.CharField(max_length=128)),
                        ("cuts", models.JSONField(default=dict)),
                        ("persist", models.BooleanField(default=False)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "reader_group",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="checkpoints",
                                to="groups.readergroup",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "streams_checkpoint",
                        "ordering": ["-created_at"],
                        "constraints": [
                            models.UniqueConstraint(fields=("reader_group", "name"), name="checkpoint_unique")
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="DeliveryCount",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("offset", models.BigIntegerField()),
                        ("count", models.IntegerField()),
                        (
                            "position",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="delivery_counts",
                                to="groups.readposition",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "streams_deliverycount",
                        "constraints": [
                            models.UniqueConstraint(fields=("position", "offset"), name="delivery_count_unique")
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="Sample",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("at", models.DateTimeField(db_index=True)),
                        ("published_events", models.BigIntegerField(default=0)),
                        ("published_bytes", models.BigIntegerField(default=0)),
                        ("held_bytes", models.BigIntegerField(default=0)),
                        ("processed", models.BigIntegerField(blank=True, null=True)),
                        ("lag_events", models.BigIntegerField(blank=True, null=True)),
                        (
                            "reader_group",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.CASCADE,
                                to="groups.readergroup",
                            ),
                        ),
                        (
                            "stream",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE, related_name="samples", to="streams.stream"
                            ),
                        ),
                    ],
                    options={
                        "db_table": "streams_sample",
                        "indexes": [models.Index(fields=["stream", "at"], name="streams_sam_stream__4b0298_idx")],
                    },
                ),
                migrations.AddConstraint(
                    model_name="subscription",
                    constraint=models.UniqueConstraint(fields=("reader_group", "stream"), name="subscription_unique"),
                ),
                migrations.AddConstraint(
                    model_name="readposition",
                    constraint=models.UniqueConstraint(
                        fields=("subscription", "segment_id"), name="read_position_unique"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="readergroup",
                    constraint=models.UniqueConstraint(fields=("scope", "name"), name="reader_group_unique_in_scope"),
                ),
            ],
        ),
        migrations.RunPython(relabel_content_types, relabel_content_types_back),
    ]
