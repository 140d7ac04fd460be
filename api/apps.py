from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The REST API: no models; an app so that its drf-spectacular extensions load with Django."""

    name = "api"
    verbose_name = "REST API"

    def ready(self):
        from api import access_schema  # noqa: F401  (registers the Api-Key scheme with drf-spectacular)
