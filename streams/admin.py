"""The Django admin of streams (reader groups' is groups.admin). Segments are shown, never
edited here: their rows follow the segment store, which only the services move. The console and
the API change them."""

from django.contrib import admin

from streams.models import Scope, Segment, Stream


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
