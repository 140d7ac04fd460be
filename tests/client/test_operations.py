"""The Python client's operations beyond consuming, against a live server: several streams' cuts
at once (and the refusal it raises), sealing, queueing a compaction."""

import json

import factories
import pytest

import cbr_client
from cbr_client import CBRError, Client

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(live_server, admin_user):
    with Client(live_server.url, token=factories.token_for(admin_user)) as c:
        yield c


def test_a_group_publishes_several_streams_cuts_at_once_or_none(client):
    for name in ("a", "b"):
        client.create_stream("shop", name)
        client.publish(f"shop/{name}", ["x"] * 5)
    group = client.create_reader_group(
        "shop", "billing", ["shop/a", "shop/b"], retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT"
    )

    published = group.publish_cuts({"shop/a": {"0": 2}, "shop/b": {"0": 5}})

    assert [(s["stream"], s["acknowledgement_cut"]) for s in published] == [("shop/a", {"0": 2}), ("shop/b", {"0": 5})]
    with pytest.raises(CBRError) as refused:
        group.publish_cuts({"shop/a": {"0": 3}, "shop/b": {"0": 9}})
    assert (refused.value.status, refused.value.code, refused.value.field) == (
        400,
        "stream_cut_not_valid",
        "stream_cuts.shop/b",
    )
    assert [s["acknowledgement_cut"] for s in group.info()["streams"]] == [{"0": 2}, {"0": 5}]  # none applied
    assert group.publish_cut("shop/a", {"0": 3}, generation=0)["acknowledgement_cut"] == {"0": 3}


def test_an_operator_seals_and_queues_a_compaction(client, test_broker):
    client.create_stream("shop", "profiles", cleanup_policy="compact")
    client.publish("shop/profiles", [{"key": "A", "payload": "1"}])

    assert client.seal("shop/profiles") == [{"segment": "0", "chunk": 0}]
    assert client.seal("shop/profiles") == []  # the new active chunk is empty
    run = client.compact("shop/profiles")

    assert (run["state"], run["trigger"]) == ("queued", "api")
    assert [r["id"] for r in client.compactions("shop/profiles")] == [run["id"]]


def test_a_group_lists_and_deletes_its_checkpoints(client):
    client.create_stream("shop", "orders")
    group = client.create_reader_group(
        "shop", "billing", ["shop/orders"], retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT"
    )
    group.checkpoint("a", persist=True)
    group.checkpoint("b")
    assert [c["name"] for c in group.checkpoints()] == ["b", "a"]
    group.delete_checkpoint("a")
    assert [c["name"] for c in group.checkpoints()] == ["b"]
    with pytest.raises(CBRError) as missing:
        group.delete_checkpoint("a")
    assert (missing.value.status, missing.value.code) == (404, "checkpoint_not_found")


def test_a_fan_out_redelivery_names_the_sinks_still_to_export_it(client):
    client.create_stream("shop", "orders")
    client.publish("shop/orders", ["x"])
    group = client.create_reader_group("shop", "billing", ["shop/orders"], sinks=["archive", "search"])
    (message,) = group.read(1)
    assert message.sinks_pending == ["archive", "search"]
    assert group.ack([message], sink="archive")["waiting_for_sinks"] == 1
    assert group.nack([message], sink="search", reason="search is down")["given_back"] == 1
    (again,) = group.read(1)
    assert (again.delivery_count, again.sinks_pending) == (2, ["search"])
    assert group.ack([again], sink="search")["acked"] == 1


def test_a_group_with_a_backoff_or_at_most_once_is_made_from_the_client(client):
    client.create_stream("shop", "orders")
    client.publish("shop/orders", ["x", "y"])
    slow = client.create_reader_group("shop", "slow", ["shop/orders"], backoff_s=[30])
    (first, _) = slow.read(2)
    slow.nack([first])  # no delay of its own: the backoff's 30 s
    assert slow.read(2) == []
    once = client.create_reader_group("shop", "once", ["shop/orders"], ack_policy="none")
    assert [m.text for m in once.consume(wait_ms=0, idle_stop=True)] == ["x", "y"]
    assert once.read(2) == []
    with pytest.raises(CBRError) as refused:
        client.create_reader_group("shop", "bad", ["shop/orders"], backoff_s=[-1])
    assert (refused.value.status, refused.value.field) == (400, "backoff_s[0]")


def test_a_bounded_group_is_read_to_its_end_then_sought_back(client):
    client.create_stream("shop", "orders")
    client.publish("shop/orders", [f"e{i}" for i in range(6)])
    group = client.create_reader_group(
        "shop",
        "billing",
        ["shop/orders"],
        start={"stream_cuts": {"shop/orders": {"0": 1}}},
        end_stream_cuts={"shop/orders": {"0": 4}},
    )
    assert consumed(group) == ["e1", "e2", "e3"]
    assert group.info()["finished"] is True
    detail = group.seek("head", generation=0)
    assert detail["generation"] == 1 and detail["finished"] is False
    assert consumed(group) == ["e0", "e1", "e2", "e3"]
    with pytest.raises(CBRError) as refused:
        group.seek("head", time="2026-01-01T00:00:00Z")
    assert (refused.value.status, refused.value.field) == (400, "time")


def consumed(group) -> list[str]:
    """Every message the group has to give, each acknowledged."""
    out = []
    for message in group.consume(wait_ms=0, idle_stop=True):
        with message:
            out.append(message.text)
    return out


def test_scope_defaults_from_the_client(client):
    policy = {"limit_type": "size", "min": 100}
    assert client.set_scope_defaults("shop", retention_policy=policy)["retention_policy"] == policy
    client.create_stream("shop", "orders")
    assert client.stream("shop/orders")["inherited_from_scope"] == ["retention_policy"]
    client.clear_scope_defaults("shop")
    assert client.scope_defaults("shop")["retention_policy"] is None
    assert client.stream("shop/orders")["retention_policy"] is None


def test_consume_gives_back_what_failed_and_the_next_read_acknowledges_the_rest(client):
    client.create_stream("shop", "jobs", segment_count=2)
    client.publish("shop/jobs", [f"job {i}" for i in range(12)])
    group = client.create_reader_group("shop", "workers", ["shop/jobs"], retention_type="NONE", ack_timeout_s=60)
    seen: list[str] = []
    failed = False
    for message in group.consume(max_events=5, wait_ms=0, idle_stop=True):
        with message:
            seen.append(message.text)
            if message.text == "job 3" and not failed:
                failed = True
                raise ValueError("try again")  # given back at once (no backoff): it comes again
    assert sorted(seen) == sorted([f"job {i}" for i in range(12)] + ["job 3"])  # once each, job 3 twice
    assert group.last_ack is not None and group.last_ack["refused"] == [] and group.refused == 0
    # every acknowledgement arrived: nothing is pending and the floors are at the tails
    detail = group.info()
    assert sum(p["pending"] for p in detail["positions"]) == 0
    assert sum(p["floor"] for p in detail["positions"]) == 12


def test_a_whole_batch_is_acknowledged_by_its_ranges_and_a_changed_one_id_by_id(client):
    client.create_stream("shop", "ranged", segment_count=2)
    client.publish("shop/ranged", [f"e{i}" for i in range(8)])
    group = client.create_reader_group("shop", "rangers", ["shop/ranged"], retention_type="NONE")
    batch = group.read(max_events=8)
    assert len(batch) == 8 and 1 <= len(batch.delivery_ranges) <= 2  # a run per segment
    kept = batch.pop()  # changed in place: its ranges no longer say what it holds
    assert batch.delivery_ranges is None
    assert group.ack(batch)["acked"] == 7
    assert group.ack([kept])["acked"] == 1


def test_reads_come_in_binary_and_give_the_messages_json_would(client, live_server, admin_user, monkeypatch):
    # given events of every shape, and two groups: one read by this client (binary, the
    # default), one by a client held to JSON
    client.create_stream("shop", "shapes", segment_count=2)
    client.publish(
        "shop/shapes",
        ["text", b"\xff\x00bin", {"payload": "h", "headers": {"a": "1"}, "key": "k", "routing_key": "r"}],
    )
    for name in ("bin", "json"):
        client.create_reader_group("shop", name, ["shop/shapes"], retention_type="NONE")
    decoded = []
    walk = cbr_client._batch_messages
    monkeypatch.setattr(cbr_client, "_batch_messages", lambda group, raw: decoded.append(raw) or walk(group, raw))
    with Client(live_server.url, token=factories.token_for(admin_user)) as plain:
        plain.binary_reads = False

        # when both read everything
        binary = client.reader_group("shop/bin").read(max_events=10)
        as_json = plain.reader_group("shop/json").read(max_events=10)

    # then the binary read was binary, and its messages are the JSON ones (but their ids)
    assert client.binary_reads and len(decoded) == 1 and decoded[0].startswith(b"CBRB") and len(binary) == 3
    assert all(isinstance(m, cbr_client.BatchMessage) for m in binary)
    # each field as the JSON message gives it, read from the answer without building `data`
    by_payload = {m.payload: m for m in as_json}
    for m in binary:
        twin = by_payload[m.payload]
        assert (m.text, m.delivery_count, m.sinks_pending) == (twin.text, twin.delivery_count, twin.sinks_pending)
        assert m.delivery_id.rsplit("-", 2)[1:] == twin.delivery_id.rsplit("-", 2)[1:]
        assert m._data is None  # not built by any of that

    def shown(batch):
        # each message's fields in their order but its id (the groups differ) and its lease's end (read
        # a moment apart), as JSON text
        return sorted(
            (json.dumps({k: v for k, v in m.data.items() if k not in ("delivery_id", "lease_expires_at")}), m.payload)
            for m in batch
        )

    assert shown(binary) == shown(as_json)
    assert {m.payload for m in binary} == {b"text", b"\xff\x00bin", b"h"}
    assert binary.delivery_ranges and len(binary.delivery_ranges) == len(as_json.delivery_ranges)


def test_streams_and_groups_are_named_scope_slash_name_and_the_older_form_still_works(client, data_dir):
    made = client.create_stream("shop/orders", segment_count=2)
    assert (made["scope"], made["name"], made["segment_count"]) == ("shop", "orders", 2)
    older = client.create_stream("shop", "returns", segment_count=1)
    assert (older["scope"], older["name"]) == ("shop", "returns")

    with pytest.raises(CBRError) as twice:  # a second time: 409, unless it may exist
        client.create_stream("shop/orders")
    assert (twice.value.status, twice.value.code) == (409, "duplicate")
    again = client.create_stream("shop/orders", segment_count=4, exist_ok=True)
    assert again["segment_count"] == 2  # as it is: its settings were not compared

    group = client.create_reader_group("shop/billing", ["shop/orders"], retention_type="NONE")
    assert group.info()["streams"][0]["stream"] == "shop/orders"
    assert client.create_reader_group("shop", "audit", ["shop/returns"]).info()["name"] == "audit"
    with pytest.raises(CBRError):
        client.create_reader_group("shop/billing", ["shop/orders"])
    assert client.create_reader_group("shop/billing", ["shop/orders"], exist_ok=True).info()["name"] == "billing"

    for bad in ("orders", "shop/", "/orders", "a/b/c"):
        with pytest.raises(ValueError, match="is not scope/name"):
            client.create_stream(bad)
    with pytest.raises(TypeError, match="by keyword"):
        client.create_stream("shop/x", 4)


def test_a_time_to_live_from_the_client_on_the_stream_and_on_events(client, clock):
    made = client.create_stream("shop/brief", message_ttl_s=60)
    assert made["message_ttl_s"] == 60
    group = client.create_reader_group("shop/late", ["shop/brief"], start="head")
    client.publish("shop/brief", ["as the stream says"])
    client.publish("shop/brief", ["own", {"payload": "its own", "ttl_s": 30}], ttl_s=600)
    clock.now += 120  # the readers' clock (the server runs in this process)

    assert consumed(group) == ["own"]  # read in binary: the frames' own time to live
