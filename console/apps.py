from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The htmx console: no models; an app for its template tags (`{% load cbr %}`)."""

    name = "console"
    verbose_name = "Console"
