from django.apps import AppConfig


class GroupsConfig(AppConfig):
    name = "groups"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # models are loaded only now; the stream layer tells this app what it must know
        # without importing it (docs/architecture.md)
        from groups import reader_groups  # noqa: F401  (receives stream_deleted, stream_scaled: streams.signals)
        from groups.delayed_release import release_due
        from streams.delaying.maintenance import release_due_with

        release_due_with(release_due)
