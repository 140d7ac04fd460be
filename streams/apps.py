from django.apps import AppConfig
from django.conf import settings

from store import redis_connection


class StreamsConfig(AppConfig):
    name = "streams"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # the store's Redis client takes its URL from the settings (read at each call: tests and
        # `make run`'s embedded Redis move it); the store itself knows nothing of Django
        redis_connection.url_from(lambda: settings.REDIS_URL)
        from streams import lookups, tasks  # noqa: F401  (receivers: tasks of delayed_bucket_sealed, lookups of saves)
