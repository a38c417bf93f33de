-- fleetroll's side of nginx's dynamic mode (loadBalancers[].nginx.mode: dynamic):
-- membership changes without a reload, so no deploy closes a keep-alive
-- client's connection.
--
-- fleetroll writes a peers file into nginx's filesystem (Docker's archive
-- API, or a plain write with exec: true), the way it writes the upstream file
-- in reload mode. One timer in worker 0 reads it every 10 ms and, when its
-- version changes, puts it into a shared dict; every worker's balancer reads
-- the dict's version on each request and re-parses only when it changed. So a
-- new set is in force within a tick of the file landing, in every worker, and
-- no worker restarts. The same timer writes a status file that fleetroll reads
-- back: the version in force (its confirmation) and the requests in flight on
-- every peer marked down (a drain ends when they reach zero).
--
-- The dict survives a reload; the peers file on disk survives a restart of
-- nginx (init reads it before the workers start), and fleetroll compares the
-- status file's version with its own before it relies on it.
--
-- Needs the Lua module and lua-resty-core (Debian: libnginx-mod-http-lua),
-- nothing else: no cjson, no shell in the image. Formats (one item a line):
--   peers:  fleetroll-peers 1 / version N / peer <ip:port> up|down <weight> <name>
--           / split header|cookie|remote_addr <name or -> <epoch> (a canary)
--           / member <group> <ip:port> up|down <weight> <name> (the peers of a
--             second upstream: blue-green's preview, a canary's forced sides)
--           / force header|cookie <name> <canary group> <stable group> / end N
--   status: fleetroll-status 1 / version N / started <time> / lua <this file's
--           VERSION> / since <time the version went in force> / inflight
--           <ip:port> <n> / end N
--
-- A group is balanced like an upstream of its own: blue-green's preview
-- upstream in nginx.conf calls balance("<preview>") and gets the group of that
-- name. The forced sides need nothing in nginx.conf: balance() of the main
-- upstream reads the header or cookie itself.
local balancer = require("ngx.balancer")

local _M = { VERSION = "2" }

local DICT = "fleetroll"
local TICK = 0.01
local upstreams = {} -- name -> { peers = path, status = path }
local cache = {} -- per worker: name -> { version, up = { {host, port, addr, weight} }, rr }
local written = {} -- per worker 0: name -> last status text
local complained = {} -- per worker 0: the last error logged for each upstream (one line, not one a tick)

local function complain(name, ...)
  local msg = table.concat({ ... })
  if complained[name] == msg then return end
  complained[name] = msg
  ngx.log(ngx.ERR, "fleetroll: ", msg)
end

local function dict()
  local d = ngx.shared[DICT]
  if not d then error("fleetroll: lua_shared_dict " .. DICT .. " is missing from nginx.conf") end
  return d
end

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local text = f:read("*a")
  f:close()
  return text
end

-- A complete peers file: its version and its text; nil while it is missing or
-- half-written (the trailer names the version of the header).
local function parse_peers_file(text)
  if not text then return nil end
  local version = text:match("^fleetroll%-peers 1\nversion (%d+)\n")
  if not version or not text:find("\nend " .. version .. "\n?$") then return nil end
  return tonumber(version), text
end

local function parse_peers(text)
  local up, down = {}, {}
  for addr, state, weight in (text or ""):gmatch("\npeer (%S+) (%a+) (%d+)") do
    local host, port = addr:match("^(.+):(%d+)$")
    if host then
      local p = { host = host, port = tonumber(port), addr = addr, weight = tonumber(weight) }
      if state == "up" then up[#up + 1] = p else down[#down + 1] = p end
    end
  end
  -- A canary's sticky split: the key each user is told apart by, and the epoch its assignments belong to.
  local kind, key, epoch = (text or ""):match("\nsplit (%S+) (%S+) (%d+)")
  -- canary.force: a header or cookie that sends a request to the canary's or stable's group.
  local fkind, fname, fcanary, fstable = (text or ""):match("\nforce (%S+) (%S+) (%S+) (%S+)")
  return up, down, kind and { kind = kind, name = key, epoch = epoch } or nil, fkind and { kind = fkind, name = fname, canary = fcanary, stable = fstable } or nil
end

local function load(name, d)
  local u = upstreams[name]
  local version, text = parse_peers_file(read_file(u.peers))
  if version and version ~= d:get(name .. ":version") then
    -- Each group's peers as a peers text of its own; a group the last set had and this one lacks is emptied.
    local groups = {}
    for g, rest in text:gmatch("\nmember (%S+) ([^\n]*)") do
      groups[g] = (groups[g] or "") .. "\npeer " .. rest
    end
    for g in (d:get(name .. ":groups") or ""):gmatch("%S+") do
      groups[g] = groups[g] or ""
    end
    local names = {}
    for g, peers in pairs(groups) do
      if peers ~= "" then names[#names + 1] = g end
      d:set(g .. ":owner", name)
      d:set(g .. ":peers", peers)
      d:set(g .. ":version", version)
    end
    d:set(name .. ":groups", table.concat(names, " "))
    -- Peers first, version last: a balancer that sees the new version finds its peers.
    d:set(name .. ":peers", text)
    d:set(name .. ":version", version)
    ngx.update_time()
    d:set(name .. ":since", ngx.now())
  end
end

local function write_status(name, d)
  local u = upstreams[name]
  local version = d:get(name .. ":version") or 0
  local lines = { "fleetroll-status 1", "version " .. version, "started " .. (d:get("started") or 0), "lua " .. _M.VERSION, "since " .. (d:get(name .. ":since") or 0) }
  local _, down = parse_peers(d:get(name .. ":peers"))
  for _, p in ipairs(down) do
    lines[#lines + 1] = "inflight " .. p.addr .. " " .. (d:get(name .. ":inflight:" .. p.addr) or 0)
  end
  lines[#lines + 1] = "end " .. version
  local text = table.concat(lines, "\n") .. "\n"
  if written[name] == text then return end
  -- Written aside and renamed, so fleetroll never reads half a file.
  local tmp = u.status .. ".tmp"
  local f, err = io.open(tmp, "wb")
  if not f then return complain(name, "cannot write the status file (the worker user needs a directory it can write): ", err) end
  f:write(text)
  f:close()
  local ok, rerr = os.rename(tmp, u.status)
  if not ok then return complain(name, "cannot rename ", tmp, ": ", rerr) end
  written[name] = text
  complained[name] = nil
end

local function tick(premature)
  if premature then return end
  local d = dict()
  for name in pairs(upstreams) do
    local ok, err = pcall(load, name, d)
    if not ok then complain(name, "reading the peers of ", name, ": ", err) end
    ok, err = pcall(write_status, name, d)
    if not ok then complain(name, "writing the status of ", name, ": ", err) end
  end
end

-- init_by_lua_block: require("fleetroll").init({ upstream = "app", peers = "/tmp/fleetroll-app.peers" })
-- The status file is the peers file's path with ".status" added.
function _M.init(o)
  assert(type(o) == "table" and o.upstream and o.peers, "fleetroll.init needs { upstream = ..., peers = ... }")
  upstreams[o.upstream] = { peers = o.peers, status = o.status or (o.peers .. ".status") }
  local d = dict()
  if not d:get("started") then d:set("started", ngx.now()) end
  -- A restart starts with an empty dict: the set on disk is the one fleetroll last wrote.
  load(o.upstream, d)
end

-- init_worker_by_lua_block: require("fleetroll").init_worker()
function _M.init_worker()
  if ngx.worker.id() ~= 0 then return end
  local ok, err = ngx.timer.every(TICK, tick)
  if not ok then ngx.log(ngx.ERR, "fleetroll: cannot start the peers timer: ", err) end
end

local function current(name)
  local d = dict()
  local version = d:get(name .. ":version")
  local c = cache[name]
  if not c or c.version ~= version then
    local up, _, split, force = parse_peers(d:get(name .. ":peers"))
    local total = 0
    for _, p in ipairs(up) do total = total + p.weight end
    -- Requests in flight are counted under the upstream whose status file reports them (a group's owner).
    c = { version = version, up = up, rr = math.random(math.max(#up, 1)) - 1, split = split, force = force, weights = total, owner = d:get(name .. ":owner") or name }
    cache[name] = c
  end
  return c, d
end

-- The value this request has for a key (the client address, a header or a cookie), or nil.
local function request_value(kind, name)
  if kind == "remote_addr" then return ngx.var.remote_addr end
  if kind == "header" then return ngx.var["http_" .. (name:lower():gsub("-", "_"))] end
  local cookies = ngx.var.http_cookie
  if not cookies then return nil end
  for k, v in cookies:gmatch("([^=;%s]+)=([^;]*)") do
    if k == name then return v end
  end
  return nil
end

-- The group a canary.force header or cookie sends this request to ("always": the canary's, "never":
-- stable's, as ingress-nginx's canary-by-header), or false. Decided once per request, so a retry stays
-- on the side it was forced to.
local function forced_group(force, ctx)
  if ctx.fleetroll_forced == nil then
    local v = request_value(force.kind, force.name)
    v = v and v:lower()
    ctx.fleetroll_forced = (v == "always" and force.canary) or (v == "never" and force.stable) or false
  end
  return ctx.fleetroll_forced
end

-- A canary's split, exact and sticky: each user is given, on first sight, to the up peer furthest below
-- its weighted share of the users given out so far, and stays there while that peer is up and holds no
-- more than its share and one user. So the canary's share of users is its weight (within a user per
-- peer), and a user changes peer only when the weights or the peers change. (nginx's `hash ...
-- consistent` with weights, reload mode's split, spreads users by a hash ring instead, as the servers'
-- addresses fall on it: 18.5-29% of users at a weight of 25 in three runs.)
local function split_peer(name, c, d, key)
  local ns = name .. ":" .. c.split.epoch
  local user = ns .. ":user:" .. key
  local total = d:get(ns .. ":users") or 0
  local at = d:get(user)
  if at then
    for _, p in ipairs(c.up) do
      if p.addr == at then
        local n = d:get(ns .. ":given:" .. at) or 0
        if n <= total * p.weight / c.weights + 1 then return p end
        break
      end
    end
    d:incr(ns .. ":given:" .. at, -1, 0)
  else
    d:incr(ns .. ":users", 1, 0)
  end
  local best, lowest
  for _, p in ipairs(c.up) do
    local share = (d:get(ns .. ":given:" .. p.addr) or 0) / p.weight
    if not best or share < lowest then best, lowest = p, share end
  end
  d:incr(ns .. ":given:" .. best.addr, 1, 0)
  d:set(user, best.addr)
  return best
end

local function count(d, name, addr, by)
  if addr then d:incr(name .. ":inflight:" .. addr, by, 0) end
end

-- balancer_by_lua_block: require("fleetroll").balance("app")
-- Round robin over the peers marked up; a retry (proxy_next_upstream) moves
-- on to the next one.
function _M.balance(name)
  local c, d = current(name)
  local ctx = ngx.ctx
  if ctx.fleetroll_peer then count(d, ctx.fleetroll_upstream, ctx.fleetroll_peer, -1) end
  -- A forced request is balanced over its side's peers; a side with none in service leaves it to the split.
  local group = c.force and forced_group(c.force, ctx)
  if group then
    local g = current(group)
    if #g.up > 0 then c = g end
  end
  local up = c.up
  if #up == 0 then
    ngx.log(ngx.ERR, "fleetroll: upstream ", name, " has no peer in service")
    -- NGX_BUSY: nginx's own "no live upstreams", a 502 as in reload mode (a status code here would be a 500).
    return ngx.exit(-3)
  end
  local p
  local key = c.split and not ctx.fleetroll_peer and request_value(c.split.kind, c.split.name)
  if key and key ~= "" then
    p = split_peer(name, c, d, key)
  else
    c.rr = c.rr % #up + 1
    p = up[c.rr]
  end
  if not ctx.fleetroll_peer and #up > 1 then balancer.set_more_tries(1) end
  local ok, err = balancer.set_current_peer(p.host, p.port)
  if not ok then
    ngx.log(ngx.ERR, "fleetroll: cannot set peer ", p.addr, ": ", err)
    return ngx.exit(500)
  end
  ctx.fleetroll_peer = p.addr
  ctx.fleetroll_upstream = c.owner
  count(d, c.owner, p.addr, 1)
end

-- log_by_lua_block: require("fleetroll").done()  (the request is over: one fewer in flight)
function _M.done()
  local ctx = ngx.ctx
  if ctx.fleetroll_peer then
    count(dict(), ctx.fleetroll_upstream, ctx.fleetroll_peer, -1)
    ctx.fleetroll_peer = nil
  end
end

return _M
