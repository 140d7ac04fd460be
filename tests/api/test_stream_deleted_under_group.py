"""Deleting a stream that reader groups read (admins only) is never silent: each group records the
removal in `removed_streams` (when, why, and the floors it had reached), its generation moves on,
its console page says so, and its acknowledgement state on the stream leaves Redis."""

import factories
import pytest

from groups.ack_tracker import SegmentTracker
from groups.models import ReaderGroup, Subscription
from store.redis_connection import get_redis

pytestmark = pytest.mark.django_db


def test_a_group_records_a_stream_deleted_under_it_and_forgets_its_state(
    api, client, admin_user, django_capture_on_commit_callbacks
):
    # given: a group that read and acknowledged 3 of 5 events of shop/orders, and also reads shop/refunds
    for name in ("orders", "refunds"):
        factories.create_stream_over_api(api, name)
    factories.publish_over_api(api, [{"payload": f"e{i}"} for i in range(5)])
    factories.create_group_over_api(api, streams=["shop/orders", "shop/refunds"], retention_type="NONE")
    read = api.post("/api/v1/reader-groups/shop/billing/read/", {"max_events": 3}, format="json").json()["deliveries"]
    api.post(
        "/api/v1/reader-groups/shop/billing/ack/", {"delivery_ids": [d["delivery_id"] for d in read]}, format="json"
    )
    sub_key = Subscription.objects.get(stream__name="orders").state_key
    state = SegmentTracker.keys_of(sub_key, "0")[0]
    assert get_redis().exists(state)
    before = api.get("/api/v1/reader-groups/shop/billing/").json()

    # when: an admin deletes shop/orders
    with django_capture_on_commit_callbacks(execute=True):
        assert api.delete("/api/v1/streams/shop/orders/").status_code == 204

    # then: the group says so, its generation moved on, and it still reads the other stream
    after = api.get("/api/v1/reader-groups/shop/billing/").json()
    assert [s["stream"] for s in after["streams"]] == ["shop/refunds"]
    assert after["generation"] == before["generation"] + 1
    [removed] = after["removed_streams"]
    assert removed["stream"] == "shop/orders" and removed["reason"] == "the stream was deleted"
    assert removed["floors"] == {"0": 3}
    assert removed["removed_at"]
    # its Redis state on the deleted stream is gone
    assert not get_redis().exists(state)
    # and the console's group page shows it
    client.force_login(admin_user)
    page = client.get("/reader-groups/shop/billing/").content.decode()
    assert "shop/orders was deleted" in page and "0:3" in page
    assert ReaderGroup.objects.get().removed_streams == after["removed_streams"]
