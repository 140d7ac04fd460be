"""The acknowledgement rules of `streams.domain.acks`, kept in Redis so that every web worker sees
one state and each step is atomic (one Lua script per read, ack or nack). The plain model is the
reference: the tests run the same random interleavings through both and compare.

Keys, per reader group, stream and segment (`{g:s:seg}` keeps them in one Redis Cluster slot):
    cbr:acks:{g:s:seg}:state   hash: floor, next, halted (absent: not halted)
    cbr:acks:{g:s:seg}:leases  sorted set: offset by lease expiry
    cbr:acks:{g:s:seg}:holder  hash: offset -> "epoch|consumer|sink,sink"
    cbr:acks:{g:s:seg}:epochs  hash: offset -> deliveries so far (above the floor)
    cbr:acks:{g:s:seg}:acked   sorted set: offsets acknowledged above the floor
    cbr:acks:{g:s:seg}:retry   sorted set: offset by the time it is due again
    cbr:acks:{g:s:seg}:poison  hash: offset -> what on_poison did
If Redis loses these keys, the tracker starts again from the floor persisted in the database:
everything above it is delivered again (at-least-once), nothing is lost.
"""

from __future__ import annotations

from dataclasses import dataclass

from .domain.acks import AckResult, Delivery, Poison

_PREFIX = "cbr:acks:"

# KEYS: state leases holder epochs acked retry poison
# floor advance, shared by ack and poison
_ADVANCE = """
local function advance(state, acked, epochs)
  local floor = tonumber(redis.call('HGET', state, 'floor') or '0')
  while redis.call('ZSCORE', acked, floor) do
    redis.call('ZREM', acked, floor)
    redis.call('HDEL', epochs, floor)
    floor = floor + 1
  end
  redis.call('HSET', state, 'floor', floor)
  return floor
end
"""

_HAND_OUT = _ADVANCE + """
local state, leases, holder, epochs, acked, retry, poison = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local now, consumer, limit, tail, lease_s = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local max_deliveries, on_poison, visible_until = tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[8])
if redis.call('HEXISTS', state, 'floor') == 0 then
  redis.call('HSET', state, 'floor', ARGV[9], 'next', ARGV[9])
end
-- expired leases are due again at once
for _, o in ipairs(redis.call('ZRANGEBYSCORE', leases, '-inf', now)) do
  redis.call('ZREM', leases, o)
  redis.call('HDEL', holder, o)
  redis.call('ZADD', retry, now, o)
end
local out = {}
local function lease(o)
  local epoch = redis.call('HINCRBY', epochs, o, 1)
  redis.call('ZADD', leases, now + lease_s, o)
  redis.call('HSET', holder, o, epoch .. '|' .. consumer .. '|')
  table.insert(out, o)
  table.insert(out, epoch)
end
local due = redis.call('ZRANGEBYSCORE', retry, '-inf', now)
local ordered = {}
for _, o in ipairs(due) do table.insert(ordered, tonumber(o)) end
table.sort(ordered)
for _, o in ipairs(ordered) do
  if #out / 2 >= limit or redis.call('HEXISTS', state, 'halted') == 1 then break end
  redis.call('ZREM', retry, o)
  if tonumber(redis.call('HGET', epochs, o) or '0') >= max_deliveries then
    redis.call('HSET', poison, o, on_poison)
    if on_poison == 'halt' then
      local h = tonumber(redis.call('HGET', state, 'halted') or o)
      redis.call('HSET', state, 'halted', math.min(h, o))
    else
      redis.call('ZADD', acked, o, o)
      advance(state, acked, epochs)
    end
  else
    lease(o)
  end
end
local nxt = tonumber(redis.call('HGET', state, 'next'))
while #out / 2 < limit and nxt < tail and nxt < visible_until and redis.call('HEXISTS', state, 'halted') == 0 do
  lease(nxt)
  nxt = nxt + 1
end
redis.call('HSET', state, 'next', nxt)
return out
"""

_ACK = _ADVANCE + """
local state, leases, holder, epochs, acked = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local o, epoch, sink, nsinks = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local h = redis.call('HGET', holder, o)
if not h then
  local floor = tonumber(redis.call('HGET', state, 'floor') or '0')
  if tonumber(o) < floor or redis.call('ZSCORE', acked, o) then return 'already-acked' end
  return 'unknown'
end
local e, consumer, sinks = string.match(h, '^(%d+)|([^|]*)|(.*)$')
if e ~= epoch then return 'stale' end
if nsinks > 0 then
  local known = false
  for i = 5, 4 + nsinks do if ARGV[i] == sink then known = true end end
  if not known then return 'unknown-sink' end
  local have = {}
  for s in string.gmatch(sinks, '[^,]+') do have[s] = true end
  have[sink] = true
  local list, count = {}, 0
  for s, _ in pairs(have) do table.insert(list, s); count = count + 1 end
  if count < nsinks then
    redis.call('HSET', holder, o, e .. '|' .. consumer .. '|' .. table.concat(list, ','))
    return 'waiting-for-sinks'
  end
end
redis.call('HDEL', holder, o)
redis.call('ZREM', leases, o)
redis.call('ZADD', acked, o, o)
advance(state, acked, epochs)
return 'ok'
"""

_NACK = """
local leases, holder, retry = KEYS[2], KEYS[3], KEYS[6]
local o, epoch, due = ARGV[1], ARGV[2], ARGV[3]
local h = redis.call('HGET', holder, o)
if not h then return 'unknown' end
if string.match(h, '^(%d+)|') ~= epoch then return 'stale' end
redis.call('HDEL', holder, o)
redis.call('ZREM', leases, o)
redis.call('ZADD', retry, due, o)
return 'ok'
"""


@dataclass(frozen=True)
class TrackerState:
    """What the tests compare with the plain model."""

    floor: int
    next: int
    leases: dict[int, int]  # offset -> epoch
    acked: set[int]
    retry: dict[int, float]
    poisoned: dict[int, str]
    halted_at: int | None


class SegmentTracker:
    """One reader group's acknowledgement state on one segment, in Redis."""

    def __init__(self, redis, group_id: int, stream_id: int, segment: str):
        self.redis = redis
        tag = f"{_PREFIX}{{{group_id}:{stream_id}:{segment}}}"
        self.keys = [f"{tag}:{part}" for part in ("state", "leases", "holder", "epochs", "acked", "retry", "poison")]
        self._hand_out = redis.register_script(_HAND_OUT)
        self._ack = redis.register_script(_ACK)
        self._nack = redis.register_script(_NACK)

    def hand_out(
        self, now: float, consumer: str, limit: int, tail: int, lease_s: float,
        max_deliveries: int, on_poison: Poison, floor: int = 0, visible_until: int | None = None,
    ) -> list[Delivery]:
        """As `SegmentAcks.hand_out`; `floor` (the persisted one) seeds a tracker Redis does not
        know (a new group, or after Redis lost its state); new offsets stop at `visible_until`."""
        flat = self._hand_out(
            keys=self.keys,
            args=[now, consumer, limit, tail, lease_s, max_deliveries, Poison(on_poison).value,
                  tail if visible_until is None else visible_until, floor],
        )
        return [Delivery(int(flat[i]), int(flat[i + 1])) for i in range(0, len(flat), 2)]

    def ack(self, delivery: Delivery, sink: str | None = None, sinks: tuple[str, ...] = ()) -> AckResult:
        answer = self._ack(
            keys=self.keys, args=[delivery.offset, delivery.epoch, sink or "", len(sinks), *sinks]
        )
        answer = answer.decode() if isinstance(answer, bytes) else answer
        return AckResult(answer == "ok", "" if answer == "ok" else answer)

    def nack(self, delivery: Delivery, now: float, delay_s: float = 0.0) -> AckResult:
        answer = self._nack(keys=self.keys, args=[delivery.offset, delivery.epoch, now + delay_s])
        answer = answer.decode() if isinstance(answer, bytes) else answer
        return AckResult(answer == "ok", "" if answer == "ok" else answer)

    def state(self) -> TrackerState:
        r = self.redis
        state = {k.decode(): v.decode() for k, v in r.hgetall(self.keys[0]).items()}
        holder = {int(k): int(v.decode().split("|", 1)[0]) for k, v in r.hgetall(self.keys[2]).items()}
        return TrackerState(
            floor=int(state.get("floor", 0)),
            next=int(state.get("next", 0)),
            leases=holder,
            acked={int(m) for m in r.zrange(self.keys[4], 0, -1)},
            retry={int(m): s for m, s in r.zrange(self.keys[5], 0, -1, withscores=True)},
            poisoned={int(k): v.decode() for k, v in r.hgetall(self.keys[6]).items()},
            halted_at=int(state["halted"]) if "halted" in state else None,
        )

    def forget(self) -> None:
        self.redis.delete(*self.keys)
