from django.apps import AppConfig


class StreamsConfig(AppConfig):
    name = "streams"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from streams import tasks  # noqa: F401  (receives delayed_bucket_sealed: streams.signals)
