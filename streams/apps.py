from django.apps import AppConfig


class StreamsConfig(AppConfig):
    name = "streams"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from streams import lookups, tasks  # noqa: F401  (receivers: tasks of delayed_bucket_sealed, lookups of saves)
