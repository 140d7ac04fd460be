"""The Django admin of streams and reader groups. Segments, subscriptions and checkpoints are
shown, never edited here: their rows follow the segment store and the acknowledgement state in
Redis, which only the services move (an acknowledgement cut typed in here would hold or release
data behind the services' checks). The console and the API change them."""

from django.contrib import admin

from streams.models import Checkpoint, ReaderGroup, Scope, Segment, Stream, Subscription


class ReadOnly:
    """An admin (or inline) that shows rows and changes none."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Scope)
class ScopeAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]


class SegmentInline(ReadOnly, admin.TabularInline):
    model = Segment
    extra = 0
    readonly_fields = [f.name for f in Segment._meta.fields if f.name != "id"]
    can_delete = False


@admin.register(Stream)
class StreamAdmin(admin.ModelAdmin):
    list_display = ["__str__", "segment_count", "cleanup_policy", "on_max_limit", "created_at"]
    list_filter = ["cleanup_policy", "on_max_limit", "scope"]
    search_fields = ["name", "scope__name"]
    readonly_fields = ["segment_count"]
    inlines = [SegmentInline]


@admin.register(Segment)
class SegmentAdmin(ReadOnly, admin.ModelAdmin):
    list_display = ["stream", "segment_id", "head_offset", "tail_offset", "head_size", "tail_size"]
    list_select_related = ["stream__scope"]


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
