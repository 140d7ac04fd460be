from django.apps import AppConfig


class AccessConfig(AppConfig):
    name = "access"
    verbose_name = "Roles and API keys"

    def ready(self):
        from . import schema  # noqa: F401  (registers the Api-Key scheme with drf-spectacular)
