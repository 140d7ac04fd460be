"""A step that queues commands on a pipeline reads its own answers (`ScriptPipeline.step`),
wherever other steps put theirs, also when one of its scripts is run again after the rest
because Redis had forgotten it (NOSCRIPT)."""

import time

import pytest
import redis as redis_lib
from redis.exceptions import ResponseError

from store.redis_connection import registered, scripted_pipeline


def test_each_step_reads_its_own_answers_wherever_they_lie(redis):
    redis.delete("a", "b")
    script = redis.register_script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
    redis.script_flush()  # the script's run comes back NOSCRIPT, and is run again after the rest
    pipe = scripted_pipeline(redis)
    pipe.set("a", "1")
    with pipe.step() as first:
        pipe.incr("a")
        pipe.incr("a")
    with pipe.step() as scripted:
        pipe.run_script(script, ["b"], [5])
    pipe.get("a")
    with pipe.step() as last:
        pipe.get("b")
    pipe.execute()
    assert first.all() == [2, 3]
    assert scripted.one() == 5 and pipe.reran
    # run again after the rest: a command queued after it did not see its effect (`reran` says so)
    assert last.one() is None


def test_replies_come_as_redis_py_gives_them_and_an_error_leaves_the_others_in_place(redis):
    redis.delete("p:s", "p:h", "p:z")
    sha = redis.script_load("return 7")
    pipe = scripted_pipeline(redis)
    pipe.set("p:s", 1.25)  # a float, as a time is sent
    pipe.get("p:s")
    pipe.hset("p:h", mapping={"x": 1})
    pipe.hgetall("p:h")
    pipe.zadd("p:z", {"m": 1.5})
    pipe.zrange("p:z", 0, -1, withscores=True)
    pipe.incr("p:s")  # refused: not an integer
    pipe.execute_command("SCRIPT EXISTS", sha)  # a name of two words
    answers = pipe.execute(raise_on_error=False)
    assert answers[:6] == [True, b"1.25", 1, {b"x": b"1"}, 1, [(b"m", 1.5)]]
    assert isinstance(answers[6], ResponseError) and "not an integer" in str(answers[6])
    assert answers[7] == [True]
    # and raised when asked
    pipe.incr("p:s")
    with pytest.raises(ResponseError, match="not an integer"):
        pipe.execute()


def test_a_script_is_registered_once_per_client_and_runs_on_each(redis, redis_url):
    source = "return ARGV[1] .. '!'"
    other = redis_lib.Redis.from_url(redis_url)
    first = registered(redis, source)
    assert registered(redis, source) is first  # not hashed and wrapped again
    theirs = registered(other, source)
    assert theirs is not first
    assert first(args=["a"]) == b"a!" and theirs(args=["b"]) == b"b!"
    other.close()


def test_what_runs_meanwhile_runs_once_the_commands_are_sent_and_before_their_replies_are_read(redis, redis_url):
    redis.delete("m:a")
    other = redis_lib.Redis.from_url(redis_url)  # another connection: it sees what Redis ran
    seen = []

    def meanwhile():
        for _ in range(500):  # the commands were sent: Redis runs them while this waits
            if other.get("m:a") is not None:
                seen.append(other.get("m:a"))
                return
            time.sleep(0.01)

    pipe = scripted_pipeline(redis)
    pipe.set("m:a", "x")
    pipe.get("m:a")
    assert pipe.execute(meanwhile=meanwhile) == [True, b"x"]
    assert seen == [b"x"]


def test_an_error_meanwhile_is_raised_after_the_replies_are_read_and_the_connection_stays_clean(redis):
    redis.delete("m:b")
    pipe = scripted_pipeline(redis)
    pipe.incr("m:b")

    def fails():
        raise RuntimeError("the database went away")

    with pytest.raises(RuntimeError, match="went away"):
        pipe.execute(meanwhile=fails)
    assert redis.get("m:b") == b"1"  # the commands ran
    for n in range(5):  # every pooled connection answers its own commands, none a reply left over
        pipe = scripted_pipeline(redis)
        pipe.incr("m:b")
        pipe.get("m:b")
        assert pipe.execute() == [n + 2, str(n + 2).encode()]


def test_what_runs_meanwhile_runs_once_even_with_nothing_to_send(redis):
    calls = []
    assert scripted_pipeline(redis).execute(meanwhile=lambda: calls.append(1)) == []
    assert calls == [1]
