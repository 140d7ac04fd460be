from django.apps import AppConfig


class AccessConfig(AppConfig):
    name = "access"
    verbose_name = "Roles and API keys"

    def ready(self):
        # its signals must be connected in every process that may change a token, key or user
        # (a console-only process, a shell), not only in those that authenticate API requests
        from access import token_cache  # noqa: F401
