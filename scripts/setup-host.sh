#!/usr/bin/env bash
# setup-host.sh — make sure this (Debian 12) machine has a running Docker engine and an
# nginx binary, so fleetroll's integration tests and examples can run; plus what the
# remote-host tests use: sshd (openssh-server, for ssh:// hosts), openssl (TLS
# certificates for tcp:// hosts) and docker-registry (a registry to pull from); and
# nginx's Lua module (libnginx-mod-http-lua), for the dynamic mode's nginx image; and
# chromium, the headless browser test/integration/metrics.test.ts loads the live page in.
#
# Idempotent and non-interactive (safe in CI). Run as root. Fast when everything is
# already in place: it only checks the binaries and pings the daemon socket.
#
# It does NOT start a system nginx, sshd or registry (packages are installed with
# service starts refused): tests run their own instances on free ports.
#
# --demo: only what `npm run demo` (fleetroll rehearse) needs: a Docker engine that
# answers, and, when it has to install one, nginx as the tests have it (the rehearsal
# builds its nginx image from this machine's binary where no registry is reachable).
# The remote-host tools (sshd, openssl, docker-registry) are neither required nor
# installed, so a machine whose engine already runs passes at once, root or not.
#
# Environment overrides:
#   DOCKER_SOCK       daemon socket to check           (default /var/run/docker.sock)
#   DOCKERD_PIDFILE   pidfile for a dockerd we start   (default /var/run/docker.pid)
#   DOCKERD_LOG       log of a dockerd we start        (default /var/log/dockerd-fleetroll.log)
#   DOCKERD_WAIT_S    seconds to wait for the daemon   (default 30)
set -euo pipefail

DOCKER_SOCK="${DOCKER_SOCK:-/var/run/docker.sock}"
DOCKERD_PIDFILE="${DOCKERD_PIDFILE:-/var/run/docker.pid}"
DOCKERD_LOG="${DOCKERD_LOG:-/var/log/dockerd-fleetroll.log}"
DOCKERD_WAIT_S="${DOCKERD_WAIT_S:-30}"

log() { printf 'setup-host: %s\n' "$*"; }
die() { printf 'setup-host: ERROR: %s\n' "$*" >&2; exit 1; }

demo=
case "${1:-}" in
  --demo) demo=1 ;;
  '') ;;
  *) die "unknown argument: $1 (expected none, or --demo)" ;;
esac

have() { command -v "$1" >/dev/null 2>&1; }
# nginx lives in /usr/sbin, which may not be on a CI user's PATH.
have_nginx() { have nginx || [ -x /usr/sbin/nginx ]; }
have_dockerd() { have dockerd || [ -x /usr/sbin/dockerd ] || [ -x /usr/bin/dockerd ]; }
have_sshd() { have sshd || [ -x /usr/sbin/sshd ]; }
# The ssh tools the tests use beside sshd (openssh-client, a dependency of openssh-server).
have_ssh_tools() { have ssh-keygen && have ssh-agent && have ssh-add; }
have_registry() { have docker-registry || [ -x /usr/bin/docker-registry ]; }
# nginx's Lua module and lua-resty-core, for the dynamic mode's nginx image (libnginx-mod-http-lua).
have_lua() { [ -f /usr/lib/nginx/modules/ngx_http_lua_module.so ] && [ -f /usr/lib/nginx/modules/ndk_http_module.so ] && [ -d /usr/share/lua/5.1/resty/core ]; }
# The live page's test (test/integration/metrics.test.ts) drives Debian's chromium headless.
have_chromium() { have chromium || [ -x /usr/bin/chromium ]; }
# etcd for the state backend's tests (scripts/etcd-cluster.sh runs 3 members on 127.0.0.1): etcd-server and etcdctl.
have_etcd() { { have etcd || [ -x /usr/bin/etcd ]; } && { have etcdctl || [ -x /usr/bin/etcdctl ]; }; }
have_extras() { [ -n "$demo" ] || { have_sshd && have_ssh_tools && have_registry && have openssl && have_lua && have_chromium && have_etcd; }; }

ping_daemon() {
  curl -fsS --max-time 2 --unix-socket "$DOCKER_SOCK" http://localhost/_ping >/dev/null 2>&1
}

# Already set up (any user): nothing to do.
if [ -n "$demo" ] && have docker && ping_daemon; then
  log "ok: docker daemon answering on $DOCKER_SOCK"
  exit 0
fi
if have docker && have_nginx && have curl && have_extras && ping_daemon; then
  log "ok: docker daemon answering on $DOCKER_SOCK, nginx, sshd, docker-registry, chromium, etcd present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  missing=()
  { have docker && have_dockerd; } || missing+=("Docker engine (apt-get install docker.io)")
  [ -n "$demo" ] || have_nginx || missing+=("nginx (apt-get install nginx-light)")
  have curl || missing+=("curl")
  if [ -z "$demo" ]; then
    { have_sshd && have_ssh_tools; } || missing+=("openssh-server")
    have_registry || missing+=("docker-registry")
    have openssl || missing+=("openssl")
    have_lua || missing+=("nginx's Lua module (apt-get install libnginx-mod-http-lua)")
    have_chromium || missing+=("chromium (apt-get install chromium)")
    have_etcd || missing+=("etcd (apt-get install etcd-server etcd-client)")
  fi
  ping_daemon || missing+=("a running docker daemon on $DOCKER_SOCK (sudo dockerd, or sudo systemctl start docker)")
  if [ -n "$demo" ]; then
    die "the demo needs: ${missing[*]}. Run this script as root to install and start them: sudo bash scripts/setup-host.sh --demo"
  fi
  die "the integration tests need: ${missing[*]}. Run this script as root to install and start them: sudo bash scripts/setup-host.sh"
fi

# --- 1. packages -----------------------------------------------------------------------
pkgs=()
# The 28.x client at /usr/local/bin/docker can exist without an engine: check dockerd too.
if ! have docker || ! have_dockerd; then pkgs+=(docker.io); fi
if ! have_nginx; then pkgs+=(nginx-light); fi
if ! have curl; then pkgs+=(curl); fi
if [ -z "$demo" ]; then
  if ! have_sshd || ! have_ssh_tools; then pkgs+=(openssh-server openssh-client); fi
  if ! have_registry; then pkgs+=(docker-registry); fi
  if ! have openssl; then pkgs+=(openssl); fi
  if ! have_lua; then pkgs+=(libnginx-mod-http-lua); fi
  if ! have_chromium; then pkgs+=(chromium); fi
  if ! have_etcd; then pkgs+=(etcd-server etcd-client); fi
fi

if [ "${#pkgs[@]}" -gt 0 ]; then
  have apt-get || die "missing ${pkgs[*]} and apt-get is not available"
  log "installing: ${pkgs[*]}"
  t0=$(date +%s)
  export NEEDRESTART_SUSPEND=1 DEBIAN_FRONTEND=noninteractive
  # Refuse service starts while installing (invoke-rc.d and deb-systemd-invoke ask
  # policy-rc.d): a system sshd on :22 or registry on :5000 is not wanted here.
  own_policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && own_policy=1
  fi
  apt-get update -qq </dev/null || die "apt-get update failed"
  rc=0
  apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    "${pkgs[@]}" </dev/null >/dev/null || rc=$?
  if [ -n "$own_policy" ]; then rm -f /usr/sbin/policy-rc.d; fi
  [ "$rc" -eq 0 ] || die "apt-get install ${pkgs[*]} failed"
  log "installed in $(( $(date +%s) - t0 ))s"
  # The package's postinst may have started a system nginx (no systemd here usually,
  # but be safe): tests need ports 80/443 free and run their own nginx.
  if [ -f /run/nginx.pid ] && kill -0 "$(cat /run/nginx.pid 2>/dev/null)" 2>/dev/null; then
    log "stopping the system nginx started by the package"
    /usr/sbin/nginx -s quit 2>/dev/null || true
  fi
else
  if [ -n "$demo" ]; then
    log "docker, dockerd, nginx and curl already installed"
  else
    log "docker, dockerd, nginx, sshd and docker-registry already installed"
  fi
fi

have docker || die "docker client still missing after install"
have_dockerd || die "dockerd still missing after install"
have_nginx || die "nginx still missing after install"
[ -n "$demo" ] || have_sshd || die "sshd still missing after install"
[ -n "$demo" ] || have_registry || die "docker-registry still missing after install"
[ -n "$demo" ] || have_lua || die "nginx's Lua module (libnginx-mod-http-lua) still missing after install"
[ -n "$demo" ] || have_chromium || die "chromium still missing after install"
[ -n "$demo" ] || have_etcd || die "etcd (etcd-server, etcd-client) still missing after install"

# --- 2. daemon ---------------------------------------------------------------------------
if ping_daemon; then
  log "docker daemon is answering on $DOCKER_SOCK"
else
  if [ -f "$DOCKERD_PIDFILE" ]; then
    pid="$(cat "$DOCKERD_PIDFILE" 2>/dev/null || true)"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null \
       && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ]; then
      log "dockerd (pid $pid) is running but not answering yet; waiting"
    else
      log "removing stale pidfile $DOCKERD_PIDFILE (pid '${pid}' is not a running dockerd)"
      rm -f "$DOCKERD_PIDFILE"
    fi
  fi
  if [ ! -f "$DOCKERD_PIDFILE" ]; then
    dockerd_bin="$(command -v dockerd || true)"
    [ -n "$dockerd_bin" ] || for c in /usr/sbin/dockerd /usr/bin/dockerd; do
      [ -x "$c" ] && dockerd_bin="$c" && break
    done
    log "starting $dockerd_bin (log: $DOCKERD_LOG)"
    mkdir -p "$(dirname "$DOCKERD_LOG")"
    # setsid: own session, so the end of a CI step / a killed parent shell leaves it running.
    launcher=(nohup)
    if have setsid; then launcher=(setsid nohup); fi
    "${launcher[@]}" "$dockerd_bin" --pidfile "$DOCKERD_PIDFILE" </dev/null >>"$DOCKERD_LOG" 2>&1 &
    disown || true
  fi
  t0=$(date +%s%N)
  deadline=$(( $(date +%s) + DOCKERD_WAIT_S ))
  until ping_daemon; do
    # dockerd writes its pidfile first thing; no live pid after 3 s means it died.
    if [ $(( $(date +%s%N) - t0 )) -gt 3000000000 ] \
       && ! kill -0 "$(cat "$DOCKERD_PIDFILE" 2>/dev/null || echo none)" 2>/dev/null; then
      echo "---- last lines of $DOCKERD_LOG ----" >&2
      tail -n 20 "$DOCKERD_LOG" >&2 2>/dev/null || true
      die "dockerd exited during startup (see $DOCKERD_LOG)"
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "---- last lines of $DOCKERD_LOG ----" >&2
      tail -n 20 "$DOCKERD_LOG" >&2 2>/dev/null || true
      die "docker daemon did not answer on $DOCKER_SOCK within ${DOCKERD_WAIT_S}s"
    fi
    sleep 0.2
  done
  log "docker daemon is up after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
fi

log "ok: docker $(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'), $( { /usr/sbin/nginx -v 2>&1 || nginx -v 2>&1; } | head -n1 | sed 's/^nginx version: //')"
