from django.apps import AppConfig


class RetentionConfig(AppConfig):
    name = "retention"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from groups.consuming.dead_letters import create_dead_letter_streams_with
        from retention import tasks  # noqa: F401  (receives holds_released: streams.signals)
        from retention.dead_letters import create_dead_letter_stream

        create_dead_letter_streams_with(create_dead_letter_stream)  # with a retention policy
