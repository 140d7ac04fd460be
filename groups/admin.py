"""The Django admin of reader groups. Subscriptions and checkpoints are shown, never edited here:
their rows follow the acknowledgement state in Redis, which only the services move (an
acknowledgement cut typed in here would hold or release data behind the services' checks). The
console and the API change them."""

from django.contrib import admin

from groups.models import Checkpoint, ReaderGroup, Subscription
from streams.admin import ReadOnly


class SubscriptionInline(ReadOnly, admin.TabularInline):
    model = Subscription
    extra = 0


@admin.register(ReaderGroup)
class ReaderGroupAdmin(admin.ModelAdmin):
    list_display = ["__str__", "retention_type", "generation", "updated_at"]
    list_filter = ["retention_type"]
    search_fields = ["name", "scope__name"]
    inlines = [SubscriptionInline]


@admin.register(Subscription)
class SubscriptionAdmin(ReadOnly, admin.ModelAdmin):
    list_display = ["reader_group", "stream", "acknowledged_at"]


@admin.register(Checkpoint)
class CheckpointAdmin(ReadOnly, admin.ModelAdmin):
    list_display = ["reader_group", "name", "persist", "created_at"]
