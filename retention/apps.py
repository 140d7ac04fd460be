from django.apps import AppConfig


class RetentionConfig(AppConfig):
    name = "retention"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from retention import tasks  # noqa: F401  (receives holds_released: streams.signals)
