from django.apps import AppConfig


class CbrwebConfig(AppConfig):
    """The composition root: an app for the commands that span every app (`seed_demo`)."""

    name = "cbrweb"
    verbose_name = "CBR"
