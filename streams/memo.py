"""Lookups a web process remembers, forgotten the moment what they read changes anywhere.

A publish looks up its stream and every API request its credential: rows that almost never
change, read on every request (a database round trip, or a Redis one, each a fifth of a one-event
publish). A `Memo` keeps them in the process, and trusts an entry only while nothing it read can
have changed since it was made:

- whoever changes what a memo reads calls `forget()` (through the ORM's signals, or explicitly
  where a change bypasses them): this process forgets at once, and every other process hears it on
  `waking.CHANGED_CHANNEL` through its listener, which moves that memo's count of changes heard
  (`Listener.changes`);
- an entry is made under a ticket taken *before* its lookup (the changes heard, the listener's
  epoch and this process's own forgets): a change heard during the lookup leaves it untrusted;
- an entry is trusted only while the listener is subscribed and has not been lost since the ticket
  (a message may have been missed while nobody listened), and for at most its memo's
  `ttl_setting` seconds, the bound for changes made around the ORM (`QuerySet.update`, SQL) that
  say nothing, and for a message the changing process could not send (Redis refused it). A memo
  without one (`GROUP_CHANGES`) relies on every change saying so.

So a change made in another process is followed once its message arrives (well under a
millisecond on one host), and without Redis nothing is remembered. Values are shared between the
process's threads: callers hand out copies of anything a request may change."""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import redis
from django.conf import settings
from django.db import transaction

from store.redis_connection import get_redis
from streams import waking

MAX_ENTRIES = 1024  # a bound, not a tuning: past it a memo starts again empty

Ticket = tuple[int, int, int]  # the listener's epoch, the changes it heard, this process's forgets


class Memo:
    def __init__(self, name: str, ttl_setting: str | None):
        self.name = name
        # the setting that says how long an entry counts (seconds; 0: never); None: no bound
        # (every change of what it reads says so)
        self.ttl_setting = ttl_setting
        self.forgotten = 0  # this process's own forgets
        self.lock = threading.Lock()
        self.entries: dict[Any, tuple[float, Ticket, Any]] = {}  # key -> (valid until, ticket, value)

    @property
    def ttl_s(self) -> float:
        return math.inf if self.ttl_setting is None else getattr(settings, self.ttl_setting)

    def ticket(self) -> Ticket | None:
        """What an entry made from a lookup starting now is made under; None: nothing is
        trusted now (the listener is not subscribed, or remembering is off)."""
        if self.ttl_s <= 0:
            return None
        listener = waking.listener()
        if not listener.healthy:
            return None
        return listener.epoch, listener.changes[self.name], self.forgotten

    def get(self, key: Any) -> tuple[Any, Ticket | None]:
        """(the remembered value or None, the ticket for `keep` after a lookup)."""
        ticket = self.ticket()
        entry = self.entries.get(key)
        if entry is not None and ticket is not None and entry[1] == ticket and entry[0] > time.monotonic():
            return entry[2], ticket
        return None, ticket

    def keep(self, key: Any, ticket: Ticket | None, value: Any) -> None:
        if ticket is None:
            return
        with self.lock:
            if len(self.entries) >= MAX_ENTRIES:
                self.entries.clear()
            self.entries[key] = (time.monotonic() + self.ttl_s, ticket, value)

    def drop(self) -> None:
        """This process's entries, gone (and any made from a lookup under way)."""
        with self.lock:
            self.forgotten += 1
            self.entries.clear()

    def forget(self, **_signal_arguments: Any) -> None:
        """What this memo read changed: every process stops trusting its entries (this one at
        once, the others when they hear it), and again once the change is committed (a lookup
        made in between read the old row). A signal receiver as it is."""
        self._drop_and_say()
        transaction.on_commit(self._drop_and_say)

    def _drop_and_say(self) -> None:
        self.drop()
        try:
            client = get_redis()
            client.publish(waking.changed_channel(client), self.name)
        except redis.RedisError:
            pass  # the others' entries run out within `ttl_s`, or their listener is down too
