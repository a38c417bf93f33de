#!/usr/bin/env bash
# second-engine.sh start|stop NAME [--tls] — a second Docker engine on this machine,
# standing in for another VM in multi-host tests. It gets its own data-root,
# exec-root, socket, pidfile and a pre-created bridge, and leaves iptables
# alone (--iptables=false --ip-masq=false): the defaults would rewrite the
# first engine's rules, and --bridge=none would delete docker0.
# Published ports work through docker-proxy, so instances are reached at
# 127.0.0.1:<port> from this machine. Prints the endpoint on start.
#
# With --tls the engine also listens on tcp://127.0.0.1:PORT with --tlsverify:
# certificates made with openssl on first use (a CA of its own, a server cert
# with IP SAN 127.0.0.1, a client cert) live in /var/lib/fleetroll-engine-NAME-tls,
# and the client's files there are ca.pem, cert.pem and key.pem. It then prints
# two lines: the tcp:// endpoint and that directory. An engine running without
# TCP is restarted with it.
set -euo pipefail
usage="usage: second-engine.sh start|stop NAME [--tls]"
cmd=${1:?$usage}
name=${2:?$usage}
tls=
case ${3:-} in
  '') ;;
  --tls) tls=1 ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
[[ $name =~ ^[a-z0-9]{1,8}$ ]] || { echo "second-engine: NAME must be 1-8 lowercase letters or digits" >&2; exit 2; }
root=/var/lib/fleetroll-engine-$name
exec_root=/var/run/fleetroll-engine-$name
sock=/var/run/fleetroll-engine-$name.sock
pidfile=/var/run/fleetroll-engine-$name.pid
bridge=fr-$name
log=/var/log/fleetroll-engine-$name.log
certs=/var/lib/fleetroll-engine-$name-tls
# The TCP address of a running engine started with --tls (removed when it stops).
tcpfile=/var/run/fleetroll-engine-$name.tcp

ping() { curl -fsS --max-time 2 --unix-socket "$sock" http://localhost/_ping >/dev/null 2>&1; }

# Containers on the bridge reach each other (an nginx container and the app), as
# on a host whose engine manages iptables: the first engine's FORWARD policy is
# DROP, and bridged traffic goes through it. One rule, for this bridge only.
allow_bridge() {
  command -v iptables >/dev/null && ip link show "$bridge" >/dev/null 2>&1 || return 0
  iptables -w -C FORWARD -i "$bridge" -o "$bridge" -j ACCEPT 2>/dev/null \
    || iptables -w -I FORWARD -i "$bridge" -o "$bridge" -j ACCEPT 2>/dev/null || true
}
ping_tls() {
  [ -f "$tcpfile" ] || return 1
  curl -fsS --max-time 2 --cacert "$certs/ca.pem" --cert "$certs/cert.pem" --key "$certs/key.pem" \
    "https://$(cat "$tcpfile")/_ping" >/dev/null 2>&1
}

# Whether process PID's command line contains TEXT. A pid file outlives its process (this
# machine's /var/run survives restarts), and its pid may by now belong to anything else.
runs_with() {
  local pid=$1 text=$2
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q -- "$text"
}

stop_engine() {
  if [ -f "$pidfile" ] && runs_with "$(cat "$pidfile" 2>/dev/null || true)" "--pidfile $pidfile"; then
    pid=$(cat "$pidfile"); kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  fi
  # Its containerd goes with it (dockerd stops it; one left behind would hold the engine's socket).
  cpid=$(cat "$exec_root/containerd/containerd.pid" 2>/dev/null || true)
  if runs_with "$cpid" "$exec_root/containerd/containerd.toml"; then
    kill "$cpid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.2; done
  fi
  rm -f "$tcpfile" "$exec_root/containerd/containerd.pid"
}

# CA, server and client certificates (EC P-256, 10 years), made once per engine name.
make_certs() {
  [ -s "$certs/ca.pem" ] && [ -s "$certs/server-cert.pem" ] && [ -s "$certs/cert.pem" ] && return 0
  command -v openssl >/dev/null || { echo "second-engine: --tls needs openssl (scripts/setup-host.sh installs it)" >&2; exit 1; }
  local tmp; tmp=$(mktemp -d "$certs.XXXXXX")
  (
    cd "$tmp"
    key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
    key ca-key.pem
    openssl req -new -x509 -key ca-key.pem -sha256 -days 3650 -subj "/CN=fleetroll test CA $name" -out ca.pem
    key server-key.pem
    openssl req -new -key server-key.pem -subj "/CN=127.0.0.1" -out server.csr
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 3650 -sha256 \
      -extfile server.ext -out server-cert.pem 2>/dev/null
    key key.pem
    openssl req -new -key key.pem -subj "/CN=fleetroll-client" -out client.csr
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 3650 -sha256 \
      -extfile client.ext -out cert.pem 2>/dev/null
    rm -f ./*.csr ./*.ext ca.srl
    chmod 600 ./*key.pem
  )
  rm -rf "$certs"; mv "$tmp" "$certs"; chmod 755 "$certs"
}

# A TCP port nothing listens on, from a range of its own (start point per engine name).
free_port() {
  local p=$(( 23000 + $(printf '%s' "$name" | cksum | cut -d' ' -f1) % 900 ))
  while ss -Hltn "sport = :$p" | grep -q .; do p=$(( p + 1 )); done
  echo "$p"
}

case $cmd in
  start)
    if ping; then
      allow_bridge
      if [ -z "$tls" ]; then echo "unix://$sock"; exit 0; fi
      if ping_tls; then echo "tcp://$(cat "$tcpfile")"; echo "$certs"; exit 0; fi
      stop_engine # running without TCP: restart it with TCP and TLS
    fi
    [ "$(id -u)" -eq 0 ] || { echo "second-engine: must run as root" >&2; exit 1; }
    # dockerd refuses to start while its pid file names a live process ("pid file found"), whatever
    # that process is. This engine's own dockerd that does not answer is stopped; any other pid is stale.
    if [ -f "$pidfile" ]; then
      if runs_with "$(cat "$pidfile" 2>/dev/null || true)" "--pidfile $pidfile"; then stop_engine; fi
      rm -f "$pidfile"
    fi
    if ! ip link show "$bridge" >/dev/null 2>&1; then
      # A /24 per engine name, in a range Docker's own pools do not use.
      n=$(( $(printf '%s' "$name" | cksum | cut -d' ' -f1) % 200 + 20 ))
      ip link add name "$bridge" type bridge
      ip addr add "10.213.$n.1/24" dev "$bridge"
      ip link set "$bridge" up
    fi
    allow_bridge
    mkdir -p "$root" "$exec_root"
    # dockerd trusts the pid file its containerd left: after a stop, or a machine that ran other
    # work meanwhile, that pid may belong to another process, and dockerd then waits for a
    # containerd socket that never comes ("containerd is still running" ... "timeout waiting for
    # containerd to start"). Keep the file only while it names this engine's containerd.
    cpid_file="$exec_root/containerd/containerd.pid"
    if [ -f "$cpid_file" ]; then
      cpid=$(cat "$cpid_file" 2>/dev/null || true)
      if ! runs_with "$cpid" "$exec_root/containerd/containerd.toml"; then
        rm -f "$cpid_file"
      fi
    fi
    listen=(-H "unix://$sock")
    if [ -n "$tls" ]; then
      make_certs
      addr="127.0.0.1:$(free_port)"
      listen+=(-H "tcp://$addr" --tlsverify --tlscacert "$certs/ca.pem" --tlscert "$certs/server-cert.pem" --tlskey "$certs/server-key.pem")
      echo "$addr" >"$tcpfile"
    fi
    logstart=$(stat -c %s "$log" 2>/dev/null || echo 0)
    setsid nohup dockerd --data-root "$root" --exec-root "$exec_root" "${listen[@]}" --pidfile "$pidfile" \
      --bridge "$bridge" --iptables=false --ip-masq=false --ip6tables=false </dev/null >>"$log" 2>&1 &
    up() { if [ -n "$tls" ]; then ping && ping_tls; else ping; fi; }
    # dockerd starts its own containerd first: 2-3 s on a quiet machine, over 20 s with the whole
    # test suite running on two cores. Wait while it is alive (up to 90 s); a dockerd that exited
    # fails at once with its log.
    for _ in $(seq 1 450); do
      up && break
      if [ -f "$pidfile" ] && ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then break; fi
      sleep 0.2
    done
    up || { tail -c "+$((logstart + 1))" "$log" | tail -n 20 >&2; echo "second-engine: dockerd $name did not start (see $log)" >&2; exit 1; }
    if [ -n "$tls" ]; then echo "tcp://$addr"; echo "$certs"; else echo "unix://$sock"; fi
    ;;
  stop) stop_engine ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
