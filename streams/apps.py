from django.apps import AppConfig


class StreamsConfig(AppConfig):
    name = "streams"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # receivers: tasks of delayed_bucket_sealed, lookups of saves, reader_groups of stream_deleted
        from streams import lookups, reader_groups, tasks  # noqa: F401
        from streams.delaying.handing import release_due
        from streams.delaying.maintenance import release_due_with

        release_due_with(release_due)
