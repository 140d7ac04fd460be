-- One hand-out round. ARGV: now (ms), limit, claim until (ms), the planned bound ('' for none),
-- the latest time among the direct indexes, the direct indexes "segment:offset:deliver_at,…"
-- ('' for none), then 4 per bucket load: bucket id, segments loaded so far (expected), segments
-- loaded after it, the frontier after it ('' when the bucket has no more), and the loaded
-- indexes past the bound "segment:offset:deliver_at,…" (into the shared queue).
--
-- A round may load several snapshot segments of a bucket: all but the last wholly due by the
-- bound (they are released in this round, as the direct indexes, without passing through the
-- shared queue), the last holding the bucket's new frontier. Then it releases everything due by
-- the bound — never past the earliest frontier (a bucket whose next segment must be loaded
-- first) — from the mutable bucket, the buckets being sealed and the shared queue, up to
-- `limit`, and puts it with the direct indexes into the hand-out area as ONE claimed batch
-- member "#n,segment:offset:deliver_at,…" (besides re-claiming unclaimed or expired members
-- there); with direct indexes, everything due by the bound goes, whatever `limit` says. Nothing
-- changes when the plan no longer holds (another process loaded one of the buckets, or a new
-- frontier lies below the bound): the caller pops without loading, then plans again.
-- Returns {status (1 done, 0 stale), re-claimed members, popped members, the new
-- batch member or '', buckets whose frontier is due: "bucket:edge:loaded"…, the next frontier
-- after those or ''}.
local now, limit, claim_until = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local planned, direct_max, direct = tonumber(ARGV[4]), tonumber(ARGV[5] ~= '' and ARGV[5] or '0'), ARGV[6]
local DUE_LISTED = 256
local function due_frontier()
  local rows = redis.call('ZRANGEBYSCORE', frontier, '-inf', now, 'WITHSCORES', 'LIMIT', 0, DUE_LISTED + 1)
  local out, after = {}, ''
  for i = 1, #rows, 2 do
    if (i + 1) / 2 > DUE_LISTED then after = rows[i + 1] break end
    out[#out + 1] = rows[i] .. ':' .. rows[i + 1] .. ':' .. (redis.call('HGET', loaded, rows[i]) or '0')
  end
  return out, after
end
local loads, loading = {}, {}
for i = 7, #ARGV, 5 do
  local b = ARGV[i]
  if tonumber(redis.call('HGET', loaded, b) or '0') ~= tonumber(ARGV[i + 1]) then
    local listed, after = due_frontier()
    return {0, {}, {}, '', listed, after}
  end
  loads[#loads + 1] = {b, ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]}
  loading[b] = true
end
-- the bound: now, the plan's, and the earliest frontier once the loads are done
local bound = now
if planned and planned < bound then bound = planned end
local edge_min
local f = redis.call('ZRANGE', frontier, 0, #loads, 'WITHSCORES')
for i = 1, #f, 2 do
  if not loading[f[i]] then edge_min = tonumber(f[i + 1]) break end
end
for _, l in ipairs(loads) do
  if l[3] ~= '' and (not edge_min or tonumber(l[3]) < edge_min) then edge_min = tonumber(l[3]) end
end
if edge_min and edge_min - 1 < bound then
  if direct ~= '' then
    local listed, after = due_frontier()
    return {0, {}, {}, '', listed, after}
  end
  bound = edge_min - 1
end
-- what is due already in the hand-out area (added due, or a claim that expired)
local reclaimed = redis.call('ZRANGEBYSCORE', due, '-inf', now, 'LIMIT', 0, limit)
local room = limit - #reclaimed
local sources = sealing_keys()
sources[#sources + 1] = mutable
sources[#sources + 1] = queue
if direct ~= '' then
  -- everything due by the bound goes with the direct indexes, or a later round would release
  -- earlier ones after them: no limit (Redis holds at most a segment per bucket and the mutable
  -- bucket, so this is bounded as the hot index is)
  room = math.huge
end
local cand = {}
for _, src in ipairs(sources) do
  local items
  if room == math.huge then
    items = redis.call('ZRANGEBYSCORE', src, '-inf', bound, 'WITHSCORES')
  else
    items = redis.call('ZRANGEBYSCORE', src, '-inf', bound, 'WITHSCORES', 'LIMIT', 0, room)
  end
  if #items > 0 then cand[#cand + 1] = {src = src, items = items, at = 1} end
end
-- the plan holds: load
for _, l in ipairs(loads) do queue_segment(l[1], l[2], l[3], l[4]) end
-- release: each source gives up a prefix of its order (its lowest ranks)
local released = tonumber(redis.call('HGET', state, 'released') or '0')
if direct ~= '' and direct_max > released then released = direct_max end
-- merged by time from the sources, each giving up a prefix of its order (its lowest ranks)
local popped = {}
while #popped < room do
  local best, best_at
  for _, c in ipairs(cand) do
    if c.at < #c.items then
      local t = tonumber(c.items[c.at + 1])
      if not best or t < best_at then best, best_at = c, t end
    end
  end
  if not best then break end
  popped[#popped + 1] = best.items[best.at] .. ':' .. best.items[best.at + 1]
  best.at = best.at + 2
  if best_at > released then released = best_at end
end
for _, c in ipairs(cand) do
  if c.at > 1 then redis.call('ZREMRANGEBYRANK', c.src, 0, (c.at - 1) / 2 - 1) end
end
local claims = {}
for _, m in ipairs(reclaimed) do
  claims[#claims + 1] = claim_until
  claims[#claims + 1] = m
end
in_chunks('ZADD', due, claims, 2)
local batch = ''
if #popped > 0 or direct ~= '' then
  local parts = {'#' .. redis.call('HINCRBY', state, 'batches', 1)}
  if #popped > 0 then parts[#parts + 1] = table.concat(popped, ',') end
  if direct ~= '' then parts[#parts + 1] = direct end
  batch = table.concat(parts, ',')
  redis.call('ZADD', due, claim_until, batch)
end
redis.call('HSET', state, 'released', released)
local listed, after = due_frontier()
return {1, reclaimed, popped, batch, listed, after}
