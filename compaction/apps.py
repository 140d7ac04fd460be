from django.apps import AppConfig


class CompactionConfig(AppConfig):
    name = "compaction"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from compaction.view import Views  # models are loaded only now
        from groups.consuming.compacted import read_compacted_from

        read_compacted_from(Views())
