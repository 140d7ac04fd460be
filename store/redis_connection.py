"""The process's Redis client (one connection pool per URL). The URL comes from whoever set the
process up (`url_from`: the Django settings' REDIS_URL, registered when the stream app starts),
else from the environment: the store knows nothing of Django."""

from __future__ import annotations

import functools
import os
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import hiredis
import redis
from redis.commands.core import Script
from redis.exceptions import NoScriptError, ResponseError


@functools.cache
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url)


def _from_environment() -> str:
    return os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")


_url: Callable[[], str] = _from_environment


def url_from(url: Callable[[], str]) -> None:
    """Where `get_redis` takes its URL from, asked at each call (a test, or a process, may move
    it while running)."""
    global _url
    _url = url


def get_redis() -> redis.Redis:
    return _client(_url())


_REGISTERED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def registered(redis: redis.Redis, source: str) -> Script:
    """`source` as a script of this client, registered once (registering hashes the source: a
    cost on every publish and read when done per call)."""
    scripts = _REGISTERED.setdefault(redis, {})
    if source not in scripts:
        scripts[source] = redis.register_script(source)
    return scripts[source]


def as_text(reply: bytes | str) -> str:
    """A reply as text. This client does not decode its replies (they are bytes); the stubs also
    allow for a client that does."""
    return reply.decode() if isinstance(reply, bytes) else reply


def as_bytes(reply: bytes | str) -> bytes:
    """A reply as bytes (see `as_text`)."""
    return reply if isinstance(reply, bytes) else reply.encode()


class ScriptPipeline(redis.client.Pipeline):
    """A non-transactional pipeline whose scripts go by EVALSHA alone. redis-py's own pipeline
    first asks `SCRIPT EXISTS` for every script queued on it, one more round trip on each read
    and ack. Here a script Redis does not know (Redis restarted, or its scripts flushed) comes
    back as NOSCRIPT: it never ran, so it is loaded and run then, alone, after the rest of the
    pipeline. A caller whose later commands depend on a script's effect (a read's counts after
    the ack it carries) checks `reran` and asks again."""

    def __init__(self, client: redis.Redis):
        super().__init__(client.connection_pool, client.response_callbacks, False, None)
        self._scripted: dict[int, tuple[Script, list, list]] = {}
        self._meanwhile: Callable[[], object] | None = None
        self.reran = False  # the last execute ran a script after the rest (NOSCRIPT)
        self.answered: list = []  # the last execute's answers (what `Answers` read)

    @contextmanager
    def step(self) -> Iterator[Answers]:
        """`with pipe.step() as answers:` the commands queued in the block are one step's, and
        `answers` reads just theirs once the pipeline has run (`Answers.all`, `Answers.one`). A
        step that queues commands reads its own answers through it: no caller counts where
        another step's answers lie."""
        answers = Answers(self, len(self))
        yield answers
        answers.end = len(self)

    def run_script(self, script: Script, keys: list, args: list) -> None:
        """Queue `script` with its keys and arguments."""
        self._scripted[len(self.command_stack)] = (script, keys, args)
        self.evalsha(script.sha, len(keys), *keys, *args)

    def _execute_pipeline(self, connection, commands: list, raise_on_error: bool) -> list:
        """The commands sent in one write, packed by hiredis as they are, and their replies read
        as redis-py's pipeline reads them (its response callbacks). redis-py's own first looks
        at every command's every argument (in Python) and for fieldsets to prepare (`HIMPORT`,
        which no command here uses): together a sixth of a pass over woken reads' CPU
        (bench/woken_pass.py)."""
        connection.send_packed_command([b"".join(hiredis.pack_command(_split_name(args)) for args, _ in commands)])
        meanwhile, self._meanwhile = self._meanwhile, None
        failed: BaseException | None = None
        if meanwhile is not None:  # while Redis runs the commands; their replies are read all the same
            try:
                meanwhile()
            except BaseException as exc:  # noqa: BLE001 - raised once the replies are read
                failed = exc
        replies: list = []
        for args, options in commands:
            try:
                replies.append(self.parse_response(connection, args[0], **options))
            except ResponseError as error:
                replies.append(error)
        if failed is not None:
            raise failed
        if raise_on_error:
            self.raise_first_error(commands, replies)
        return replies

    def execute(self, raise_on_error: bool = True, meanwhile: Callable[[], object] | None = None) -> list:
        """Run the queued commands. `meanwhile`: called once the commands are sent, before their
        replies are read (work of another server done while Redis runs them, such as a statement
        to the database); an error it raises is raised once the replies are read, so the
        connection goes back to the pool clean."""
        scripted, self._scripted = self._scripted, {}
        self._meanwhile = meanwhile
        try:
            answers = super().execute(raise_on_error=False)
            if self._meanwhile is not None:  # nothing was sent (no command queued)
                self._meanwhile()
        finally:
            self._meanwhile = None
        self.reran = False
        for i, (script, keys, args) in scripted.items():
            if isinstance(answers[i], NoScriptError):
                answers[i] = script(keys=keys, args=args)  # loads it, then runs it
                self.reran = True
        if raise_on_error:
            for answer in answers:
                if isinstance(answer, Exception):
                    raise answer
        self.answered = answers
        return answers


def _split_name(args: tuple) -> tuple:
    """A command's arguments as Redis takes them: a name of two words (`"SCRIPT LOAD"`) is two."""
    name = args[0]
    if isinstance(name, str) and " " in name:
        return (*name.split(), *args[1:])
    return args


class Answers:
    """The answers of the commands one step put on a `ScriptPipeline` (`ScriptPipeline.step`),
    read once the pipeline has run."""

    __slots__ = ("end", "pipe", "start")

    def __init__(self, pipe: ScriptPipeline, start: int):
        self.pipe, self.start, self.end = pipe, start, start

    def all(self) -> list:
        """Each command's answer, in the order they were queued."""
        return self.pipe.answered[self.start : self.end]

    def one(self) -> Any:
        """The answer of the step's one command."""
        assert self.end == self.start + 1, "the step queued one command"
        return self.pipe.answered[self.start]


def scripted_pipeline(client: redis.Redis | None = None) -> ScriptPipeline:
    """A `ScriptPipeline` on `client` (the process's by default)."""
    return ScriptPipeline(get_redis() if client is None else client)


def read_many(commands: list[tuple], client: redis.Redis | None = None) -> list:
    """The replies to many read-only commands (each a tuple of str, bytes or int: `("HMGET", key,
    field, …)`), sent in one round trip on one of the pool's connections. What a pipeline does,
    without its work per command (arguments kept, packed one by one, response callbacks: about
    10 µs a command, most of a `/metrics` scrape that reads 80 000): the replies come as the
    connection parses them, so a hash may come back as a list (RESP2) or a dict (RESP3). An
    error reply raises; on any failure the connection is dropped, so none goes back to the pool
    with replies unread."""
    if not commands:
        return []
    pool = (get_redis() if client is None else client).connection_pool
    conn = pool.get_connection()
    try:
        conn.send_packed_command([_packed(commands)])
        return [conn.read_response() for _ in commands]
    except BaseException:
        conn.disconnect()
        raise
    finally:
        pool.release(conn)


def _packed(commands: list[tuple]) -> bytes:
    """The commands in RESP, as `Connection.pack_commands` writes them."""
    out = []
    for command in commands:
        out.append(b"*%d\r\n" % len(command))
        for arg in command:
            raw = arg if isinstance(arg, bytes) else str(arg).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(raw), raw))
    return b"".join(out)
