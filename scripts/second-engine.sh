#!/usr/bin/env bash
# second-engine.sh start|stop NAME — a second Docker engine on this machine,
# standing in for another VM in multi-host tests. It gets its own data-root,
# exec-root, socket, pidfile and a pre-created bridge, and leaves iptables
# alone (--iptables=false --ip-masq=false): the defaults would rewrite the
# first engine's rules, and --bridge=none would delete docker0.
# Published ports work through docker-proxy, so instances are reached at
# 127.0.0.1:<port> from this machine. Prints the endpoint on start.
set -euo pipefail
cmd=${1:?usage: second-engine.sh start|stop NAME}
name=${2:?usage: second-engine.sh start|stop NAME}
[[ $name =~ ^[a-z0-9]{1,8}$ ]] || { echo "second-engine: NAME must be 1-8 lowercase letters or digits" >&2; exit 2; }
root=/var/lib/fleetroll-engine-$name
exec_root=/var/run/fleetroll-engine-$name
sock=/var/run/fleetroll-engine-$name.sock
pidfile=/var/run/fleetroll-engine-$name.pid
bridge=fr-$name
log=/var/log/fleetroll-engine-$name.log

ping() { curl -fsS --max-time 2 --unix-socket "$sock" http://localhost/_ping >/dev/null 2>&1; }

case $cmd in
  start)
    if ping; then echo "unix://$sock"; exit 0; fi
    [ "$(id -u)" -eq 0 ] || { echo "second-engine: must run as root" >&2; exit 1; }
    if [ -f "$pidfile" ] && ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then rm -f "$pidfile"; fi
    if ! ip link show "$bridge" >/dev/null 2>&1; then
      # A /24 per engine name, in a range Docker's own pools do not use.
      n=$(( $(printf '%s' "$name" | cksum | cut -d' ' -f1) % 200 + 20 ))
      ip link add name "$bridge" type bridge
      ip addr add "10.213.$n.1/24" dev "$bridge"
      ip link set "$bridge" up
    fi
    mkdir -p "$root" "$exec_root"
    setsid nohup dockerd --data-root "$root" --exec-root "$exec_root" -H "unix://$sock" --pidfile "$pidfile" \
      --bridge "$bridge" --iptables=false --ip-masq=false --ip6tables=false </dev/null >>"$log" 2>&1 &
    for _ in $(seq 1 100); do ping && break; sleep 0.2; done
    ping || { tail -n 20 "$log" >&2; echo "second-engine: dockerd $name did not start (see $log)" >&2; exit 1; }
    echo "unix://$sock"
    ;;
  stop)
    if [ -f "$pidfile" ]; then
      pid=$(cat "$pidfile"); kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    fi
    ;;
  *) echo "usage: second-engine.sh start|stop NAME" >&2; exit 2 ;;
esac
