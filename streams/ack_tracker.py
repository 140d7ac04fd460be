"""The acknowledgement rules of `streams.domain.acks`, kept in Redis so that every web worker sees
one state and each step is atomic (one Lua script per read, per ack batch, per nack batch). The
plain model is the reference: the tests run the same random interleavings through both and
compare.

Keys, per reader group, stream and segment (`{g:s:seg}` keeps them in one Redis Cluster slot):
    cbr:acks:{g:s:seg}:state   hash: floor, next, halted (absent: not halted), and counters
                               redelivered, dead_lettered, skipped
    cbr:acks:{g:s:seg}:leases  sorted set: offset by lease expiry
    cbr:acks:{g:s:seg}:holder  hash: offset -> "epoch|consumer|sink,sink"
    cbr:acks:{g:s:seg}:epochs  hash: offset -> deliveries so far (above the floor)
    cbr:acks:{g:s:seg}:acked   sorted set: offsets acknowledged above the floor
    cbr:acks:{g:s:seg}:retry   sorted set: offset by the time it is due (again)
    cbr:acks:{g:s:seg}:poison  hash: offset -> what on_poison did (above the floor)
    cbr:acks:{g:s:seg}:dead    sorted set: offset by when its dead-letter append was claimed
    cbr:acks:{g:s:seg}:reason  hash: offset -> why it was last given back (nack reason, timeout)
If Redis loses these keys, the tracker starts again from the floor persisted in the database:
everything above it is delivered again (at-least-once), nothing is lost.
"""

from __future__ import annotations

from dataclasses import dataclass

from .domain.acks import AckResult, Delivery, HandOut, Poison

_PREFIX = "cbr:acks:"
_PARTS = ("state", "leases", "holder", "epochs", "acked", "retry", "poison", "dead", "reason")

_COMMON = """
local state, leases, holder, epochs, acked, retry, poison, dead, reason =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local function in_chunks(command, key, items, width)
  -- one call per 500 items: `width` values per item (HDEL: 1; HSET, ZADD: 2)
  local step = 500 * width
  for i = 1, #items, step do
    redis.call(command, key, unpack(items, i, math.min(i + step - 1, #items)))
  end
end
local function advance()
  -- move the floor over the acknowledged offsets right above it, a run at a time
  local floor = tonumber(redis.call('HGET', state, 'floor'))
  local start = floor
  while true do
    local run = redis.call('ZRANGEBYSCORE', acked, floor, floor + 999)
    local n = 0
    for _, m in ipairs(run) do
      if tonumber(m) ~= floor + n then break end
      n = n + 1
    end
    if n == 0 then break end
    redis.call('ZREMRANGEBYSCORE', acked, floor, floor + n - 1)
    floor = floor + n
    if n < 1000 then break end
  end
  if floor > start then
    local gone = {}
    for o = start, floor - 1 do table.insert(gone, o) end
    in_chunks('HDEL', epochs, gone, 1)
    if redis.call('HLEN', poison) > 0 then in_chunks('HDEL', poison, gone, 1) end
    if redis.call('HLEN', reason) > 0 then in_chunks('HDEL', reason, gone, 1) end
    redis.call('HSET', state, 'floor', floor)
  end
  return floor
end
local function below(key, offset, kind)
  local gone = {}
  if kind == 'hash' then
    for _, o in ipairs(redis.call('HKEYS', key)) do
      if tonumber(o) < offset then table.insert(gone, o) end
    end
    for _, o in ipairs(gone) do redis.call('HDEL', key, o) end
  else
    for _, o in ipairs(redis.call('ZRANGE', key, 0, -1)) do
      if tonumber(o) < offset then table.insert(gone, o) end
    end
    for _, o in ipairs(gone) do redis.call('ZREM', key, o) end
  end
  return gone
end
local function drop_below(offset)
  redis.call('HSET', state, 'floor', offset)
  if tonumber(redis.call('HGET', state, 'next')) < offset then
    redis.call('HSET', state, 'next', offset)
  end
  redis.call('ZREMRANGEBYSCORE', acked, '-inf', '(' .. offset)
  for _, o in ipairs(below(holder, offset, 'hash')) do redis.call('ZREM', leases, o) end
  below(retry, offset, 'zset')
  below(epochs, offset, 'hash')
  below(poison, offset, 'hash')
  below(dead, offset, 'zset')
  below(reason, offset, 'hash')
  local halted = redis.call('HGET', state, 'halted')
  if halted and tonumber(halted) < offset then redis.call('HDEL', state, 'halted') end
  return advance()
end
"""

_HAND_OUT = _COMMON + """
local now, consumer, limit, tail, lease_s = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local max_deliveries, on_poison, scan_until = tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[8])
local persisted, head = tonumber(ARGV[9]), tonumber(ARGV[10])
local delayed = {}
for i = 11, #ARGV, 2 do delayed[tonumber(ARGV[i])] = tonumber(ARGV[i + 1]) end

if redis.call('HEXISTS', state, 'floor') == 0 then
  redis.call('HSET', state, 'floor', persisted, 'next', persisted)
elseif persisted > tonumber(redis.call('HGET', state, 'floor')) then
  drop_below(persisted)
end
local missed = 0
local floor = tonumber(redis.call('HGET', state, 'floor'))
if head > floor then
  local nxt = tonumber(redis.call('HGET', state, 'next'))
  local upto = math.min(head, nxt)
  if upto > floor then
    missed = (upto - floor) - redis.call('ZCOUNT', acked, floor, upto - 1)
  end
  missed = missed + math.max(0, head - nxt)
  drop_below(head)
end
-- expired leases are due again at once
for _, o in ipairs(redis.call('ZRANGEBYSCORE', leases, '-inf', now)) do
  redis.call('ZREM', leases, o)
  redis.call('HDEL', holder, o)
  redis.call('ZADD', retry, now, o)
  redis.call('HSET', reason, o, 'lease expired')
end
-- dead-letter appends claimed a lease ago and never confirmed: claim them again
local dead_out = {}
for _, o in ipairs(redis.call('ZRANGEBYSCORE', dead, '-inf', now - lease_s)) do
  redis.call('ZADD', dead, now, o)
  table.insert(dead_out, tonumber(o))
end
local function is_halted() return redis.call('HEXISTS', state, 'halted') == 1 end
local function poison_it(o)
  redis.call('HSET', poison, o, on_poison)
  if on_poison == 'halt' then
    local h = tonumber(redis.call('HGET', state, 'halted') or o)
    redis.call('HSET', state, 'halted', math.min(h, o))
  elseif on_poison == 'dead_letter' then
    redis.call('ZADD', dead, now, o)
    table.insert(dead_out, o)
  else
    redis.call('ZADD', acked, o, o)
    redis.call('HINCRBY', state, 'skipped', 1)
    advance()
  end
end
local halted = redis.call('HGET', state, 'halted')
if halted then
  local h = tonumber(halted)
  if tonumber(redis.call('HGET', epochs, h) or '0') < max_deliveries then
    redis.call('HDEL', state, 'halted')
    redis.call('ZADD', retry, now, h)
  elseif on_poison ~= 'halt' then
    redis.call('HDEL', state, 'halted')
    poison_it(h)
  end
end
local out = {}
local function lease(o)
  local epoch = redis.call('HINCRBY', epochs, o, 1)
  if epoch > 1 then redis.call('HINCRBY', state, 'redelivered', 1) end
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
  if #out / 2 >= limit or is_halted() then break end
  redis.call('ZREM', retry, o)
  if tonumber(redis.call('HGET', epochs, o) or '0') >= max_deliveries then
    poison_it(o)
  else
    lease(o)
  end
end
local nxt = tonumber(redis.call('HGET', state, 'next'))
local stop = math.min(tail, scan_until)
-- offsets never handed out: their first delivery, written in batches
local first_epochs, first_leases, first_holders = {}, {}, {}
local holding = '1|' .. consumer .. '|'
if not is_halted() then
  while #out / 2 < limit and nxt < stop do
    local o = nxt
    nxt = nxt + 1
    local when = delayed[o]
    if when and when > now then
      redis.call('ZADD', retry, when, o)
    else
      table.insert(out, o)
      table.insert(out, 1)
      table.insert(first_epochs, o); table.insert(first_epochs, 1)
      table.insert(first_leases, now + lease_s); table.insert(first_leases, o)
      table.insert(first_holders, o); table.insert(first_holders, holding)
    end
  end
end
in_chunks('HSET', epochs, first_epochs, 2)
in_chunks('ZADD', leases, first_leases, 2)
in_chunks('HSET', holder, first_holders, 2)
redis.call('HSET', state, 'next', nxt)
table.sort(dead_out)
return {out, dead_out, missed, tonumber(redis.call('HGET', state, 'floor'))}
"""

# ARGV: sink, number of sinks, the sinks, then (offset, epoch) pairs
_ACK_MANY = _COMMON + """
local sink, nsinks = ARGV[1], tonumber(ARGV[2])
local required = {}
for i = 3, 2 + nsinks do required[ARGV[i]] = true end
local answers, done, done_scored, seen = {}, {}, {}, {}
for i = 3 + nsinks, #ARGV, 2 do
  local o, epoch = ARGV[i], ARGV[i + 1]
  local answer = 'ok'
  local h = redis.call('HGET', holder, o)
  if seen[o] then
    answer = 'already-acked'  -- named twice in one batch
  elseif not h then
    local floor = tonumber(redis.call('HGET', state, 'floor') or '0')
    if tonumber(o) < floor or redis.call('ZSCORE', acked, o) then answer = 'already-acked'
    else answer = 'unknown' end
  else
    local e, consumer, sinks = string.match(h, '^(%d+)|([^|]*)|(.*)$')
    if e ~= epoch then
      answer = 'stale'
    elseif nsinks > 0 then
      if not required[sink] then
        answer = 'unknown-sink'
      else
        local have, count, list = {}, 0, {}
        for s in string.gmatch(sinks, '[^,]+') do have[s] = true end
        have[sink] = true
        for s, _ in pairs(have) do table.insert(list, s); count = count + 1 end
        if count < nsinks then
          table.sort(list)
          redis.call('HSET', holder, o, e .. '|' .. consumer .. '|' .. table.concat(list, ','))
          answer = 'waiting-for-sinks'
        end
      end
    end
    if answer == 'ok' then
      seen[o] = true
      table.insert(done, o)
      table.insert(done_scored, o)
      table.insert(done_scored, o)
    end
  end
  table.insert(answers, answer)
end
in_chunks('HDEL', holder, done, 1)
in_chunks('ZREM', leases, done, 1)
in_chunks('ZADD', acked, done_scored, 2)
local floor = 0
if redis.call('HEXISTS', state, 'floor') == 1 then floor = advance() end
return {answers, floor}
"""

# ARGV: due, reason, then (offset, epoch) pairs
_NACK_MANY = _COMMON + """
local due, why = ARGV[1], ARGV[2]
local answers = {}
for i = 3, #ARGV, 2 do
  local o, epoch = ARGV[i], ARGV[i + 1]
  local h = redis.call('HGET', holder, o)
  if not h then
    table.insert(answers, 'unknown')
  elseif string.match(h, '^(%d+)|') ~= epoch then
    table.insert(answers, 'stale')
  else
    redis.call('HDEL', holder, o)
    redis.call('ZREM', leases, o)
    redis.call('ZADD', retry, due, o)
    if why ~= '' then redis.call('HSET', reason, o, why) end
    table.insert(answers, 'ok')
  end
end
return answers
"""

# ARGV: offsets whose dead-letter appends are durable
_DEAD_LETTERED = _COMMON + """
for _, o in ipairs(ARGV) do
  if redis.call('ZSCORE', dead, o) then
    redis.call('ZREM', dead, o)
    redis.call('ZADD', acked, o, o)
    redis.call('HINCRBY', state, 'dead_lettered', 1)
  end
end
if redis.call('HEXISTS', state, 'floor') == 0 then return 0 end
return advance()
"""


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass(frozen=True)
class TrackerState:
    """What the tests compare with the plain model."""

    floor: int
    next: int
    leases: dict[int, int]  # offset -> epoch
    acked: set[int]
    retry: dict[int, float]
    poisoned: dict[int, str]  # above the floor
    dead: dict[int, float]
    halted_at: int | None


@dataclass(frozen=True)
class TrackerStats:
    """What the console and /metrics show of one group on one segment."""

    floor: int | None  # None: Redis holds nothing (never read, or lost)
    next: int | None
    pending: int  # live leases
    waiting: int  # due later: nacked with a delay, or a delayed event
    acked_above_floor: int
    dead_pending: int
    halted_at: int | None
    redelivered: int
    dead_lettered: int
    skipped: int


class SegmentTracker:
    """One reader group's acknowledgement state on one segment, in Redis."""

    def __init__(self, redis, group_id: int, stream_id: int, segment: str):
        self.redis = redis
        tag = f"{_PREFIX}{{{group_id}:{stream_id}:{segment}}}"
        self.keys = [f"{tag}:{part}" for part in _PARTS]
        self._hand_out = redis.register_script(_HAND_OUT)
        self._ack = redis.register_script(_ACK_MANY)
        self._nack = redis.register_script(_NACK_MANY)
        self._dead_lettered = redis.register_script(_DEAD_LETTERED)

    def hand_out(
        self, now: float, consumer: str, limit: int, tail: int, lease_s: float,
        max_deliveries: int, on_poison: Poison, *, floor: int = 0, head: int = 0,
        delayed: dict[int, float] | None = None, scan_until: int | None = None,
    ) -> HandOut:
        """As `SegmentAcks.hand_out`."""
        args = [now, consumer, limit, tail, lease_s, max_deliveries, Poison(on_poison).value,
                tail if scan_until is None else scan_until, floor, head]
        for offset, due in (delayed or {}).items():
            args += [offset, due]
        flat, dead, missed, new_floor = self._hand_out(keys=self.keys, args=args)
        deliveries = [Delivery(int(flat[i]), int(flat[i + 1])) for i in range(0, len(flat), 2)]
        return HandOut(deliveries, [int(o) for o in dead], int(missed), int(new_floor))

    def ack_many(
        self, deliveries: list[Delivery], sink: str | None = None, sinks: tuple[str, ...] = ()
    ) -> tuple[list[AckResult], int]:
        """Acknowledge a batch; returns each delivery's result and the floor after them."""
        args: list = [sink or "", len(sinks), *sinks]
        for d in deliveries:
            args += [d.offset, d.epoch]
        answers, floor = self._ack(keys=self.keys, args=args)
        return [_result(a) for a in answers], int(floor)

    def ack(self, delivery: Delivery, sink: str | None = None, sinks: tuple[str, ...] = ()) -> AckResult:
        return self.ack_many([delivery], sink, sinks)[0][0]

    def nack_many(
        self, deliveries: list[Delivery], now: float, delay_s: float = 0.0, reason: str = ""
    ) -> list[AckResult]:
        args: list = [now + delay_s, reason]
        for d in deliveries:
            args += [d.offset, d.epoch]
        return [_result(a) for a in self._nack(keys=self.keys, args=args)]

    def nack(self, delivery: Delivery, now: float, delay_s: float = 0.0, reason: str = "") -> AckResult:
        return self.nack_many([delivery], now, delay_s, reason)[0]

    def dead_lettered(self, offsets: list[int]) -> int:
        """The appends of these offsets to the dead-letter stream are durable; returns the floor."""
        return int(self._dead_lettered(keys=self.keys, args=offsets)) if offsets else 0

    def reasons(self, offsets: list[int]) -> dict[int, str]:
        if not offsets:
            return {}
        values = self.redis.hmget(self.keys[8], offsets)
        return {o: _text(v) for o, v in zip(offsets, values, strict=True) if v is not None}

    def state(self) -> TrackerState:
        r = self.redis
        state = {_text(k): _text(v) for k, v in r.hgetall(self.keys[0]).items()}
        holder = {int(k): int(_text(v).split("|", 1)[0]) for k, v in r.hgetall(self.keys[2]).items()}
        return TrackerState(
            floor=int(state.get("floor", 0)),
            next=int(state.get("next", 0)),
            leases=holder,
            acked={int(m) for m in r.zrange(self.keys[4], 0, -1)},
            retry={int(m): s for m, s in r.zrange(self.keys[5], 0, -1, withscores=True)},
            poisoned={int(k): _text(v) for k, v in r.hgetall(self.keys[6]).items()},
            dead={int(m): s for m, s in r.zrange(self.keys[7], 0, -1, withscores=True)},
            halted_at=int(state["halted"]) if "halted" in state else None,
        )

    def forget(self) -> None:
        self.redis.delete(*self.keys)


def _result(answer) -> AckResult:
    answer = _text(answer)
    return AckResult(answer == "ok", "" if answer == "ok" else answer)


def stats_many(redis, trackers: list[SegmentTracker]) -> list[TrackerStats]:
    """The stats of many trackers in one round trip."""
    pipe = redis.pipeline(transaction=False)
    for t in trackers:
        state, leases, _, _, acked, retry, _, dead, _ = t.keys
        pipe.hgetall(state)
        pipe.zcard(leases)
        pipe.zcard(retry)
        pipe.zcard(acked)
        pipe.zcard(dead)
    answers = pipe.execute()
    out = []
    for i in range(len(trackers)):
        state_raw, pending, waiting, acked, dead = answers[5 * i: 5 * i + 5]
        state = {_text(k): int(v) for k, v in state_raw.items()}
        out.append(
            TrackerStats(
                floor=state.get("floor"), next=state.get("next"), pending=pending, waiting=waiting,
                acked_above_floor=acked, dead_pending=dead, halted_at=state.get("halted"),
                redelivered=state.get("redelivered", 0), dead_lettered=state.get("dead_lettered", 0),
                skipped=state.get("skipped", 0),
            )
        )
    return out
