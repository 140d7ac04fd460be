"""A step that queues commands on a pipeline reads its own answers (`ScriptPipeline.step`),
wherever other steps put theirs, also when one of its scripts is run again after the rest
because Redis had forgotten it (NOSCRIPT)."""

from store.redis_connection import scripted_pipeline


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
