from django.urls import path

from console import (
    access_views,
    account_views,
    browse_views,
    dashboard_views,
    group_views,
    jobs_views,
    manage_views,
    schedules_views,
    scope_views,
    stream_views,
)

app_name = "console"

urlpatterns = [
    path("", dashboard_views.dashboard, name="dashboard"),
    path("streams/", stream_views.stream_list, name="streams"),
    path("streams/new/", manage_views.create_stream, name="stream-new"),
    path("scopes/<name:scope>/defaults/", scope_views.scope_defaults_page, name="scope-defaults"),
    path("scopes/<name:scope>/defaults/clear/", scope_views.clear_scope_defaults, name="scope-defaults-clear"),
    path("streams/<name:scope>/<name:name>/", stream_views.stream_detail, name="stream"),
    path("streams/<name:scope>/<name:name>/policy/", stream_views.policy_panel, name="policy"),
    path("streams/<name:scope>/<name:name>/events/", browse_views.events_page, name="stream-events"),
    path("streams/<name:scope>/<name:name>/events/publish/", browse_views.publish, name="stream-publish"),
    path("streams/<name:scope>/<name:name>/settings/", manage_views.stream_settings, name="stream-settings"),
    path("streams/<name:scope>/<name:name>/delete/", manage_views.delete_stream, name="stream-delete"),
    path("streams/<name:scope>/<name:name>/purge/", manage_views.purge_stream, name="stream-purge"),
    path("streams/<name:scope>/<name:name>/delayed/", stream_views.delayed_panel, name="delayed"),
    path("streams/<name:scope>/<name:name>/compaction/", stream_views.compaction_panel, name="compaction"),
    path("streams/<name:scope>/<name:name>/compaction/run/", stream_views.compact_now, name="compact-now"),
    path("streams/<name:scope>/<name:name>/retention/run/", stream_views.run_retention_now, name="run-retention"),
    path("jobs/", jobs_views.jobs, name="jobs"),
    path("schedules/", schedules_views.schedules, name="schedules"),
    path("schedules/<int:pk>/", schedules_views.edit_schedule, name="schedule-edit"),
    path("cycles/<int:pk>/", jobs_views.cycle, name="cycle"),
    path("reader-groups/", group_views.reader_group_list, name="reader-groups"),
    path("reader-groups/new/", manage_views.create_group, name="reader-group-new"),
    path("reader-groups/<name:scope>/<name:name>/", group_views.reader_group_detail, name="reader-group"),
    path("reader-groups/<name:scope>/<name:name>/seek/", group_views.seek_reader_group, name="reader-group-seek"),
    path("reader-groups/<name:scope>/<name:name>/settings/", manage_views.group_settings, name="reader-group-settings"),
    path("reader-groups/<name:scope>/<name:name>/delete/", manage_views.delete_group, name="reader-group-delete"),
    path("reader-groups/<name:scope>/<name:name>/checkpoints/", group_views.checkpoint_now, name="checkpoint-now"),
    path(
        "reader-groups/<name:scope>/<name:name>/checkpoints/<checkpoint:checkpoint>/release/",
        group_views.release_checkpoint,
        name="checkpoint-release",
    ),
    path(
        "reader-groups/<name:scope>/<name:name>/checkpoints/<checkpoint:checkpoint>/delete/",
        group_views.delete_checkpoint,
        name="checkpoint-delete",
    ),
    path("account/password/", account_views.change_password, name="password"),
    path("api-keys/", access_views.api_keys, name="api-keys"),
    path("api-keys/<key_prefix:prefix>/revoke/", access_views.revoke_api_key, name="api-key-revoke"),
]
