"""The Lua scripts of the acknowledgement tracker (groups.ack_tracker explains the keys). Each
runs atomically in Redis: one per read of a segment, per batch of acks, per batch of nacks, and
per confirmation of dead-letter appends. They implement the rules of domain.acks, and
the tests run both side by side.

What they must never do is call Redis once per offset where a batch of offsets is at hand: inside
a script every `redis.call` costs about a microsecond (bench/RESULTS.md), more than the rest of an
acknowledgement. So lease expiries are kept per hand-out, not per offset; bits are looked up in
blocks read once (`reader`), and a batch's bit changes are one mask combined by BITOP
(`apply_mask`); deliveries arrive as msgpack, decoded in C.

The scripts are `.lua` files in `lua/` beside this module: `ack_common.lua` (the keys and the
helpers every script shares), `ack_deliveries.lua` (decoding a batch of deliveries), and one file
per script, which says what it takes and returns; `look.lua` runs two of them (`read_counts`,
`hand_out`) as functions in one call, and `look_many.lua` runs `look` for many reads."""

from importlib.resources import files

# The shape of the keys. A state of another shape (an older release's) is dropped by the next
# hand-out, as if Redis had lost it: everything above the persisted floor comes again.
LAYOUT = "2"

_LUA = files("groups") / "lua"  # read through importlib: the package may be in a zip (a Spark job's)


def _lua(name: str) -> str:
    """A script's own part, from `lua/<name>.lua` beside this module (read once, at import)."""
    return "\n" + (_LUA / f"{name}.lua").read_text()


# what every script starts with: the keys, and the helpers that keep the bitmaps and side tables
_COMMON = "\nlocal LAYOUT = '" + LAYOUT + "'\n" + (_LUA / "ack_common.lua").read_text()
# deliveries travel as one msgpack array (ack_tracker._packed), decoded in C
_DELIVERIES = _lua("ack_deliveries")

HAND_OUT = _COMMON + _lua("hand_out")
ACK_MANY = _COMMON + _DELIVERIES + _lua("ack_many")
NACK_MANY = _COMMON + _DELIVERIES + _lua("nack_many")
DEAD_LETTERED = _COMMON + _lua("dead_lettered")
FAN_OUT = _COMMON + _lua("fan_out")
READ_COUNTS = _COMMON + _lua("read_counts")
IN_FLIGHT = _COMMON + _lua("in_flight")
CLAIM = _COMMON + _lua("claim")


def _as_function(name: str) -> str:
    """A script's own part as a local function of its arguments (`name(ARGV)`), for a script
    that runs it beside another: one implementation of each rule."""
    return f"\nlocal function {name}(ARGV){_lua(name)}\nend\n"


# a read's counts and its hand-out in one call, when the read knows where the segment stopped; the
# looks of many reads at one place of a segment in one call (the state keys set for each in turn)
_LOOKS = (
    _COMMON
    + "\nlocal noted_seen, noted_consumers\n"
    + _as_function("read_counts")
    + _as_function("hand_out")
    + _as_function("look")
)
LOOK = _LOOKS + _lua("look_one")
LOOK_MANY = _LOOKS + _lua("look_many")
