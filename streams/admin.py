from django.contrib import admin

from streams.models import Checkpoint, ReaderGroup, Scope, Segment, Stream, Subscription


@admin.register(Scope)
class ScopeAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]


class SegmentInline(admin.TabularInline):
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
class SegmentAdmin(admin.ModelAdmin):
    list_display = ["stream", "segment_id", "head_offset", "tail_offset", "head_size", "tail_size"]
    list_select_related = ["stream__scope"]


class SubscriptionInline(admin.TabularInline):
    model = Subscription
    extra = 0


@admin.register(ReaderGroup)
class ReaderGroupAdmin(admin.ModelAdmin):
    list_display = ["__str__", "retention_type", "generation", "updated_at"]
    list_filter = ["retention_type"]
    search_fields = ["name", "scope__name"]
    inlines = [SubscriptionInline]


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    list_display = ["reader_group", "stream", "acknowledged_at"]


@admin.register(Checkpoint)
class CheckpointAdmin(admin.ModelAdmin):
    list_display = ["reader_group", "name", "persist", "created_at"]
