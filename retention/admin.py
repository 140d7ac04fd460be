from django.contrib import admin

from retention.models import RetentionPolicy, StoredRetentionSet, TruncationRecord


@admin.register(RetentionPolicy)
class RetentionPolicyAdmin(admin.ModelAdmin):
    list_display = ["stream", *RetentionPolicy.COLUMNS.values()]
    list_filter = ["limit_type", "consumption_based"]


@admin.register(StoredRetentionSet)
class StoredRetentionSetAdmin(admin.ModelAdmin):
    list_display = ["stream", "__str__"]
    raw_id_fields = ["stream"]


@admin.register(TruncationRecord)
class TruncationRecordAdmin(admin.ModelAdmin):
    list_display = ["stream", "created_at", "rule", "trigger", "triggered_by", "bytes_deleted"]
    list_filter = ["trigger", "rule"]
    readonly_fields = [f.name for f in TruncationRecord._meta.fields]
