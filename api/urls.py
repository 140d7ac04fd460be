from django.urls import path
from drf_spectacular.views import SpectacularSwaggerView

from access.login import json_refusal, rate_limited_login
from api import access_views, compaction_views, large_events, many_reads, reader_group_views, scope_views
from api import stream_views as views
from api.schema import SchemaView

S = "streams/<name:scope>/<name:name>/"
RG = "reader-groups/<name:scope>/<name:name>/"

urlpatterns = [
    path(
        "auth/token/",
        rate_limited_login(
            access_views.TokenView.as_view(), failed=lambda r: r.status_code != 200, refusal=json_refusal
        ),
        name="api-token",
    ),
    path("streams/", views.StreamListView.as_view(), name="api-streams"),
    path(S, views.StreamDetailView.as_view(), name="api-stream"),
    path(S + "retention-policy/", views.RetentionPolicyView.as_view(), name="api-policy"),
    path(S + "events/", views.EventsView.as_view(), name="api-events"),
    path(S + "events/export/", views.ExportView.as_view(), name="api-export"),
    path(S + "events/raw/", large_events.LargeEventView.as_view(), name="api-events-raw"),
    path(
        S + "events/<name:segment>/<int:offset>/payload/",
        large_events.EventPayloadView.as_view(),
        name="api-event-payload",
    ),
    path(S + "truncate/", views.TruncateView.as_view(), name="api-truncate"),
    path(S + "purge/", views.PurgeView.as_view(), name="api-purge"),
    path(S + "republish/", views.RepublishView.as_view(), name="api-republish"),
    path(S + "truncations/", views.TruncationListView.as_view(), name="api-truncations"),
    path(S + "seal/", views.SealView.as_view(), name="api-seal"),
    path(S + "offload/", views.OffloadView.as_view(), name="api-offload"),
    path(S + "scale/", views.ScaleView.as_view(), name="api-scale"),
    path(S + "scalings/", views.ScalingListView.as_view(), name="api-scalings"),
    path(S + "scaling-policy/", views.ScalingPolicyView.as_view(), name="api-scaling-policy"),
    path(S + "retention-set/", views.RetentionSetView.as_view(), name="api-retention-set"),
    path(S + "compacted/", compaction_views.CompactedViewView.as_view(), name="api-compacted"),
    path(S + "compactions/", compaction_views.CompactionListView.as_view(), name="api-compactions"),
    path("scopes/<name:scope>/defaults/", scope_views.ScopeDefaultsView.as_view(), name="api-scope-defaults"),
    path("reader-groups/", reader_group_views.ReaderGroupListView.as_view(), name="api-reader-groups"),
    path(RG, reader_group_views.ReaderGroupDetailView.as_view(), name="api-reader-group"),
    path(RG + "truncation-cut/", reader_group_views.TruncationCutView.as_view(), name="api-truncation-cut"),
    path(RG + "seek/", reader_group_views.SeekView.as_view(), name="api-seek"),
    path(RG + "read/", reader_group_views.ReadView.as_view(), name="api-read"),
    path("reads/", many_reads.ManyReadsView.as_view(), name="api-many-reads"),
    path(RG + "ack/", reader_group_views.AckView.as_view(), name="api-ack"),
    path(RG + "nack/", reader_group_views.NackView.as_view(), name="api-nack"),
    path(RG + "consumers/", reader_group_views.ConsumerListView.as_view(), name="api-consumers"),
    path(RG + "checkpoints/", reader_group_views.CheckpointListView.as_view(), name="api-checkpoints"),
    path(
        RG + "checkpoints/<checkpoint:checkpoint>/",
        reader_group_views.CheckpointDetailView.as_view(),
        name="api-checkpoint",
    ),
    path(
        RG + "checkpoints/<checkpoint:checkpoint>/release/",
        reader_group_views.CheckpointReleaseView.as_view(),
        name="api-checkpoint-release",
    ),
    path("api-keys/", access_views.ApiKeyListView.as_view(), name="api-keys"),
    path("api-keys/<key_prefix:prefix>/", access_views.ApiKeyDetailView.as_view(), name="api-key"),
    path("schema/", SchemaView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]
