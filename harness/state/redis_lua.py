"""The one Lua script behind every operation of the redis backend (atomic per call).

It does in Redis what memory.py does in the process, with the same limits (passed in
by the caller from :class:`~harness.state.limits.StateLimits`) and the same refusal
codes (:func:`~harness.state.limits.refusal`). Keys under ``<ns>:``, per scope tag:
``c:<tag>`` (cache hash), ``m:<tag>`` (counter hash), ``o:<tag>`` (outputs hash),
``t:<tag>`` (output expiry, a sorted set); server-wide: ``lru`` (scopes by last use),
``use`` (bytes and items per scope and in total), ``gone`` (evicted scopes by time)
and ``unsaid`` (evicted scopes not yet told). Every key carries a TTL (the idle expiry
plus a minute), renewed on use. A single Redis or a primary (not Redis Cluster).
"""

from __future__ import annotations

SCRIPT = r"""
local op, ns, tag = ARGV[1], ARGV[2], ARGV[3]
local L = {}
for v in string.gmatch(ARGV[4], '[^,]+') do L[#L + 1] = tonumber(v) end
local MAXB, MAXN, SCN, SCB, SMN, SOB, SPILL, TTL, TOMBS, CCOST, SCOST = unpack(L)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000  -- ms, to the microsecond
local function ms(x) return string.format('%.3f', x) end  -- a score, never rounded
-- a score above every other of ``zkey``: the order of use, even within one microsecond
local function stamp(zkey)
  local top = redis.call('ZRANGE', zkey, -1, -1, 'WITHSCORES')[2]
  if top and tonumber(top) >= now then return ms(tonumber(top) + 0.001) end
  return ms(now)
end
local LRU, USE, GONE, UNSAID = ns .. ':lru', ns .. ':use', ns .. ':gone', ns .. ':unsaid'
local KEEP = TTL + 60000
local function C(tg) return ns .. ':c:' .. tg end
local function M(tg) return ns .. ':m:' .. tg end
local function O(tg) return ns .. ':o:' .. tg end
local function T(tg) return ns .. ':t:' .. tg end
local function num(key, field) return tonumber(redis.call('HGET', key, field) or '0') end

local function account(tg, part, db, dn)
  if db ~= 0 then
    redis.call('HINCRBY', USE, part .. ':' .. tg, db)
    redis.call('HINCRBY', USE, 'b:' .. tg, db)
    redis.call('HINCRBY', USE, '#b', db)
  end
  if dn ~= 0 then
    redis.call('HINCRBY', USE, 'n:' .. tg, dn)
    redis.call('HINCRBY', USE, '#n', dn)
  end
end

local function forget(tg)
  redis.call('ZREM', LRU, tg)
  redis.call('HDEL', USE, 'b:' .. tg, 'n:' .. tg, 'cb:' .. tg, 'mb:' .. tg, 'ob:' .. tg)
end

local function drop(tg)
  local b, n = num(USE, 'b:' .. tg), num(USE, 'n:' .. tg)
  redis.call('DEL', C(tg), M(tg), O(tg), T(tg))
  forget(tg)
  redis.call('HINCRBY', USE, '#b', -b)
  redis.call('HINCRBY', USE, '#n', -n)
end

local function mark_gone(tg, unsaid)
  redis.call('ZADD', GONE, stamp(GONE), tg)
  if unsaid then redis.call('SADD', UNSAID, tg) end
  local extra = redis.call('ZCARD', GONE) - TOMBS
  if extra > 0 then
    for _, old in ipairs(redis.call('ZRANGE', GONE, 0, extra - 1)) do
      redis.call('SREM', UNSAID, old)
    end
    redis.call('ZREMRANGEBYRANK', GONE, 0, extra - 1)
  end
end

local function expire()
  for _ = 1, 32 do
    local oldest = redis.call('ZRANGE', LRU, 0, 0, 'WITHSCORES')
    if #oldest == 0 or tonumber(oldest[2]) + TTL > now then break end
    drop(oldest[1])
  end
  for _, tg in ipairs(redis.call('ZRANGEBYSCORE', GONE, '-inf', ms(now - TTL), 'LIMIT', 0, 64)) do
    redis.call('ZREM', GONE, tg)
    redis.call('SREM', UNSAID, tg)
  end
end

local function keep()
  for _, k in ipairs({C(tag), M(tag), O(tag), T(tag), LRU, USE, GONE, UNSAID}) do
    redis.call('PEXPIRE', k, KEEP)
  end
end

local function settle()
  if num(USE, 'n:' .. tag) <= 0 then forget(tag) end
end

-- false: the scope was evicted and is told so now (once)
local function enter(consume, create)
  expire()
  if consume and redis.call('SREM', UNSAID, tag) == 1 then return false end
  if create or redis.call('ZSCORE', LRU, tag) then redis.call('ZADD', LRU, stamp(LRU), tag) end
  return true
end

-- bytes held: payload, and SCOST per scope in LRU (a scope holding anything, or the
-- writer's new one)
local function total() return num(USE, '#b') + SCOST * redis.call('ZCARD', LRU) end

local function room(db, dn)
  while total() + db > MAXB or num(USE, '#n') + dn > MAXN do
    local two = redis.call('ZRANGE', LRU, 0, 1)
    local victim = two[1]
    if victim == tag then victim = two[2] end
    if not victim then return false end
    drop(victim)
    mark_gone(victim, true)
  end
  return true
end

local function prune()
  local refs = redis.call('ZRANGEBYSCORE', T(tag), '-inf', ms(now))
  for _, ref in ipairs(refs) do
    local size = redis.call('HSTRLEN', O(tag), ref) + #ref
    redis.call('HDEL', O(tag), ref)
    account(tag, 'ob', -size, -1)
  end
  if #refs > 0 then redis.call('ZREMRANGEBYSCORE', T(tag), '-inf', ms(now)) end
end

local function drop_oldest_output()
  local ref = redis.call('ZRANGE', T(tag), 0, 0)[1]
  if not ref then return false end
  local size = redis.call('HSTRLEN', O(tag), ref) + #ref
  redis.call('HDEL', O(tag), ref)
  redis.call('ZREM', T(tag), ref)
  account(tag, 'ob', -size, -1)
  mark_gone(tag, false)
  return true
end

local function done(reply)
  settle()
  keep()
  return reply
end

if op == 'usage' then
  return {'ok', total(), num(USE, '#n')}
end

if op == 'put_output' then
  local ref, data = ARGV[5], ARGV[6]
  local size = #data + #ref
  enter(false, true)
  prune()
  while num(USE, 'ob:' .. tag) + size > SOB and drop_oldest_output() do end
  while not room(size, 1) do
    if not drop_oldest_output() then return done({'full'}) end
  end
  redis.call('HSET', O(tag), ref, data)
  redis.call('ZADD', T(tag), ms(now + SPILL), ref)
  account(tag, 'ob', size, 1)
  return done({'ok'})
end

if op == 'get_output' then
  local ref = ARGV[5]
  enter(false, false)
  prune()
  local data = redis.call('HGET', O(tag), ref)
  if data then return done({'ok', data}) end
  local when = redis.call('ZSCORE', GONE, tag)
  if when and tonumber(when) + SPILL > now then return done({'gone'}) end
  return done({'ok', false})
end

local writes = op == 'cache_set' or op == 'counter_incr' or op == 'counter_set'
if not enter(true, writes) then return done({'evicted'}) end

if op == 'cache_get' then return done({'ok', redis.call('HGET', C(tag), ARGV[5])}) end
if op == 'cache_has' then return done({'ok', redis.call('HEXISTS', C(tag), ARGV[5])}) end
if op == 'counter_get' then return done({'ok', redis.call('HGET', M(tag), ARGV[5])}) end
if op == 'counter_snapshot' then return done({'ok', redis.call('HGETALL', M(tag))}) end

if op == 'cache_set' then
  local key, enc = ARGV[5], ARGV[6]
  local size = #key + #enc
  local exists = redis.call('HEXISTS', C(tag), key) == 1
  local was, dn = 0, 1
  if exists then was, dn = #key + redis.call('HSTRLEN', C(tag), key), 0 end
  if not exists and redis.call('HLEN', C(tag)) >= SCN then return done({'entries'}) end
  if num(USE, 'cb:' .. tag) - was + size > SCB then return done({'bytes'}) end
  if not room(size - was, dn) then return done({'full'}) end
  redis.call('HSET', C(tag), key, enc)
  account(tag, 'cb', size - was, dn)
  return done({'ok'})
end

if op == 'cache_delete' then
  local key = ARGV[5]
  if redis.call('HEXISTS', C(tag), key) == 0 then return done({'ok', 0}) end
  account(tag, 'cb', -(#key + redis.call('HSTRLEN', C(tag), key)), -1)
  redis.call('HDEL', C(tag), key)
  return done({'ok', 1})
end

if op == 'cache_clear' then
  account(tag, 'cb', -num(USE, 'cb:' .. tag), -redis.call('HLEN', C(tag)))
  redis.call('DEL', C(tag))
  return done({'ok'})
end

if op == 'counter_incr' or op == 'counter_set' then
  local name, value = ARGV[5], ARGV[6]
  local exists = redis.call('HEXISTS', M(tag), name) == 1
  if not exists then
    if redis.call('HLEN', M(tag)) >= SMN then return done({'metrics'}) end
    if not room(#name + CCOST, 1) then return done({'full'}) end
  end
  local result = value
  if op == 'counter_set' then
    redis.call('HSET', M(tag), name, value)
  else
    local r = redis.pcall('HINCRBY', M(tag), name, value)
    if type(r) == 'table' then return done({'overflow'}) end
    result = redis.call('HGET', M(tag), name)  -- the text: a Lua number is a double
  end
  if not exists then account(tag, 'mb', #name + CCOST, 1) end
  return done({'ok', result})
end

if op == 'counter_delete' then
  local name = ARGV[5]
  if redis.call('HDEL', M(tag), name) == 1 then account(tag, 'mb', -(#name + CCOST), -1) end
  return done({'ok'})
end

if op == 'counter_reset' then
  account(tag, 'mb', -num(USE, 'mb:' .. tag), -redis.call('HLEN', M(tag)))
  redis.call('DEL', M(tag))
  return done({'ok'})
end

return redis.error_reply('unknown state operation ' .. op)
"""
