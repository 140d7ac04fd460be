"""A database recreated empty, or restored from a backup, beside a Redis that kept the old
deployment's state: the database hands out its ids again, and a new reader group must never take
an old group's acknowledgement state with them (it would skip events it never read). Every event
is delivered at least once, none is skipped, and the floors persisted are the new group's own.

A backup is real: pg_dump and pg_restore on PostgreSQL, SQLite's backup API on SQLite."""

from __future__ import annotations

import sqlite3
import subprocess

import factories
import pytest
from django.core.management import call_command
from django.db import connection

from groups.models import ReaderGroup, ReadPosition, Subscription
from streams.models import Stream

pytestmark = [pytest.mark.django_db(transaction=True)]


def publish(api, texts):
    factories.publish_over_api(api, [{"payload": t} for t in texts])


def create_group(api, name):
    factories.create_group_over_api(api, name, retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT")


def consume(api, group, at_most=None) -> tuple[list[str], int]:
    """Read and acknowledge until nothing is left (or `at_most` events): the payloads, in the
    order handed out, and the events the server reported missed."""
    got, missed = [], 0
    while at_most is None or len(got) < at_most:
        limit = 10 if at_most is None else min(10, at_most - len(got))
        answer = api.post(f"/api/v1/reader-groups/shop/{group}/read/", {"max_events": limit}, format="json")
        assert answer.status_code == 200, answer.content
        body = answer.json()
        missed += body.get("missed", 0)
        deliveries = body["deliveries"]
        if not deliveries:
            break
        got += [d["payload"] for d in deliveries]
        ack = api.post(
            f"/api/v1/reader-groups/shop/{group}/ack/",
            {"delivery_ids": [d["delivery_id"] for d in deliveries]},
            format="json",
        )
        assert ack.status_code == 200, ack.content
    return got, missed


def admin_api():
    return factories.api_client(factories.make_user("root", "admin"))


def read(api, group, limit) -> list[dict]:
    answer = api.post(f"/api/v1/reader-groups/shop/{group}/read/", {"max_events": limit}, format="json")
    assert answer.status_code == 200, answer.content
    return answer.json()["deliveries"]


def test_a_fresh_database_beside_an_old_redis_delivers_every_event_to_a_new_group():
    # given: an old deployment whose group consumed and acknowledged 30 of its 50 events, and
    # holds 10 more unacknowledged (a consumer of it still runs); its database new too, so that
    # the next one hands out the same ids whatever ran before this test
    call_command("flush", "--noinput")
    old = admin_api()
    factories.create_stream_over_api(old)
    publish(old, [f"old {i}" for i in range(50)])
    create_group(old, "billing")
    acked, _ = consume(old, "billing", at_most=30)
    assert len(acked) == 30
    held = [d["delivery_id"] for d in read(old, "billing", 10)]
    old_ids = (Stream.objects.get().pk, ReaderGroup.objects.get().pk, Subscription.objects.get().pk)
    # when: the database is made anew (its ids start again), Redis is kept, and the same names
    # come back with 40 new events
    call_command("flush", "--noinput")
    new = admin_api()
    factories.create_stream_over_api(new)
    publish(new, [f"new {i}" for i in range(40)])
    create_group(new, "billing")
    assert (Stream.objects.get().pk, ReaderGroup.objects.get().pk, Subscription.objects.get().pk) == old_ids
    # then: every new event is delivered, none reported missed
    deliveries = read(new, "billing", 40)
    assert [d["payload"] for d in deliveries] == [f"new {i}" for i in range(40)]
    # the old consumer's ids name none of the new deliveries (same ids, same offsets, same epochs)
    stale = new.post("/api/v1/reader-groups/shop/billing/ack/", {"delivery_ids": held}, format="json")
    assert stale.status_code == 400 and stale.json()["code"] == "unknown_delivery", stale.content
    assert ReadPosition.objects.get().floor == 0
    # and the floor is the new group's own once its consumer acknowledged
    ack = new.post(
        "/api/v1/reader-groups/shop/billing/ack/",
        {"delivery_ids": [d["delivery_id"] for d in deliveries]},
        format="json",
    )
    assert ack.status_code == 200 and ack.json()["acked"] == 40, ack.content
    assert ReadPosition.objects.get().floor == 40
    assert consume(new, "billing") == ([], 0)


class Backup:
    """The test database saved and put back as an operator's backup tools would."""

    def __init__(self, path):
        self.path = path
        self.settings = connection.settings_dict

    def take(self) -> None:
        if connection.vendor == "postgresql":
            subprocess.run(["pg_dump", "-Fc", "-f", str(self.path), *self._pg_args()], check=True)
        else:
            with sqlite3.connect(self.settings["NAME"]) as live, sqlite3.connect(self.path) as saved:
                live.backup(saved)

    def restore(self) -> None:
        connection.close()
        if connection.vendor == "postgresql":
            subprocess.run(
                ["pg_restore", "--clean", "--if-exists", "--single-transaction", *self._pg_args(), str(self.path)],
                check=True,
            )
        else:
            with sqlite3.connect(self.path) as saved, sqlite3.connect(self.settings["NAME"]) as live:
                saved.backup(live)

    def _pg_args(self) -> list[str]:
        s = self.settings
        return [
            "-h",
            s["HOST"] or "127.0.0.1",
            "-p",
            str(s["PORT"] or 5432),
            "-U",
            s["USER"] or "postgres",
            "-d",
            s["NAME"],
        ]


def test_a_group_made_after_a_database_is_restored_from_a_backup_gets_every_event(api, tmp_path):
    # given: a stream of 40 events, backed up; a group made after the backup read them all
    factories.create_stream_over_api(api)
    publish(api, [f"e{i}" for i in range(40)])
    backup = Backup(tmp_path / "backup")
    backup.take()
    create_group(api, "billing")
    got, _ = consume(api, "billing")
    assert len(got) == 40
    billing = (ReaderGroup.objects.get().pk, Subscription.objects.get().pk)
    # when: the database is restored from the backup (the group is gone; Redis kept its state),
    # and a new group is made, which takes the ids the restored database hands out again
    backup.restore()
    assert not ReaderGroup.objects.exists()
    create_group(api, "audit")
    assert (ReaderGroup.objects.get().pk, Subscription.objects.get().pk) == billing
    # then: the new group reads every event, none missed
    got, missed = consume(api, "audit")
    assert sorted(got, key=lambda t: int(t[1:])) == [f"e{i}" for i in range(40)]
    assert missed == 0
