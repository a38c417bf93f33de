#!/usr/bin/env bash
# etcd-cluster.sh start|stop|status|leader|kill NAME|wipe — a 3-member etcd
# cluster on 127.0.0.1 from Debian's etcd-server (scripts/setup-host.sh
# installs it), for the tests of fleetroll's etcd state backend and for
# trying it by hand.
#
#   start   starts the members that are not running (all three the first
#           time) and waits until the cluster answers; prints the client
#           endpoints, comma-separated. A member killed with `kill` rejoins.
#   stop    stops every member (SIGTERM, then SIGKILL after 10 s); keeps data.
#   status  one line per member: name, client URL, running or not, leader.
#   leader  the name of the member that leads now (m1, m2 or m3).
#   kill N  SIGKILLs member N (m1, m2 or m3): a crashed machine.
#   wipe    stops every member and removes their data: the next start is a
#           new, empty cluster.
#
# Members: m1, m2, m3, clients on 127.0.0.1:12379, 22379, 32379 and peers on
# 12380, 22380, 32380 (not etcd's default 2379, so that a system etcd does
# not collide). Data and logs live under /var/lib/fleetroll-etcd (override:
# FLEETROLL_ETCD_DIR).
set -euo pipefail
usage="usage: etcd-cluster.sh start|stop|status|leader|kill NAME|wipe"
cmd=${1:?$usage}
dir=${FLEETROLL_ETCD_DIR:-/var/lib/fleetroll-etcd}
names=(m1 m2 m3)
client() { echo "http://127.0.0.1:${1#m}2379"; }
peer() { echo "http://127.0.0.1:${1#m}2380"; }
endpoints() {
  local out=() n
  for n in "${names[@]}"; do out+=("$(client "$n")"); done
  (IFS=,; echo "${out[*]}")
}
cluster() {
  local out=() n
  for n in "${names[@]}"; do out+=("$n=$(peer "$n")"); done
  (IFS=,; echo "${out[*]}")
}
etcd_bin=$(command -v etcd || echo /usr/bin/etcd)
etcdctl_bin=$(command -v etcdctl || echo /usr/bin/etcdctl)
ctl() { ETCDCTL_API=3 "$etcdctl_bin" --dial-timeout=1s --command-timeout=2s "$@"; }

pid_of() {
  local f="$dir/$1.pid"
  [ -f "$f" ] || return 1
  local p
  p=$(cat "$f")
  kill -0 "$p" 2>/dev/null || return 1
  echo "$p"
}

start_member() {
  local n=$1 state=new
  mkdir -p "$dir"
  # A member with data rejoins the cluster it was part of.
  [ -d "$dir/$n.etcd/member" ] && state=existing
  nohup "$etcd_bin" --name "$n" --data-dir "$dir/$n.etcd" \
    --listen-client-urls "$(client "$n")" --advertise-client-urls "$(client "$n")" \
    --listen-peer-urls "$(peer "$n")" --initial-advertise-peer-urls "$(peer "$n")" \
    --initial-cluster "$(cluster)" --initial-cluster-token fleetroll-test \
    --initial-cluster-state "$state" \
    --heartbeat-interval 100 --election-timeout 1000 \
    --logger zap --log-level warn >>"$dir/$n.log" 2>&1 </dev/null &
  echo $! >"$dir/$n.pid"
}

stop_all() {
  local n p
  for n in "${names[@]}"; do
    if p=$(pid_of "$n"); then kill "$p" 2>/dev/null || true; fi
  done
  for _ in $(seq 1 100); do
    local alive=0
    for n in "${names[@]}"; do pid_of "$n" >/dev/null && alive=1; done
    [ $alive -eq 0 ] && return 0
    sleep 0.1
  done
  for n in "${names[@]}"; do
    if p=$(pid_of "$n"); then kill -9 "$p" 2>/dev/null || true; fi
  done
}

case $cmd in
  start)
    [ -x "$etcd_bin" ] || { echo "etcd-cluster: etcd is not installed (sudo bash scripts/setup-host.sh)" >&2; exit 1; }
    for n in "${names[@]}"; do pid_of "$n" >/dev/null || start_member "$n"; done
    for _ in $(seq 1 300); do
      if ctl --endpoints "$(endpoints)" endpoint health >/dev/null 2>&1 && [ -n "$(ctl --endpoints "$(endpoints)" endpoint status -w simple 2>/dev/null | awk -F', ' '$5 == "true"')" ]; then
        endpoints
        exit 0
      fi
      sleep 0.1
    done
    echo "etcd-cluster: the cluster did not answer within 30 s; logs in $dir/m*.log" >&2
    tail -n 5 "$dir"/m*.log >&2 || true
    exit 1
    ;;
  stop) stop_all ;;
  wipe)
    stop_all
    rm -rf "$dir"
    ;;
  status)
    for n in "${names[@]}"; do
      if pid_of "$n" >/dev/null; then
        leader=$(ctl --endpoints "$(client "$n")" endpoint status -w simple 2>/dev/null | awk -F', ' '{print $5}')
        echo "$n $(client "$n") running${leader:+ leader=$leader}"
      else
        echo "$n $(client "$n") stopped"
      fi
    done
    ;;
  leader)
    for n in "${names[@]}"; do
      if pid_of "$n" >/dev/null && [ "$(ctl --endpoints "$(client "$n")" endpoint status -w simple 2>/dev/null | awk -F', ' '{print $5}')" = true ]; then
        echo "$n"
        exit 0
      fi
    done
    echo "etcd-cluster: no member leads now" >&2
    exit 1
    ;;
  kill)
    n=${2:?$usage}
    [[ " ${names[*]} " == *" $n "* ]] || { echo "etcd-cluster: NAME must be m1, m2 or m3" >&2; exit 2; }
    if p=$(pid_of "$n"); then kill -9 "$p"; fi
    ;;
  *)
    echo "$usage" >&2
    exit 2
    ;;
esac
