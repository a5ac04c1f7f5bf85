#!/usr/bin/env bash
# Start the services the integration tests need (PostgreSQL and Redis on loopback) if they are not
# answering, then wait until they answer. The machine normally runs both already; on a machine
# without them, they are installed from Debian's packages (needs root). Safe to run repeatedly.
#
#   scripts/services.sh          # start if needed and wait (at most SERVICES_WAIT seconds, default 60)
#
# Tests reach them at postgresql://postgres@127.0.0.1:5432/test (trust auth) and
# redis://127.0.0.1:6379/0.
set -euo pipefail

WAIT="${SERVICES_WAIT:-60}"

log() { echo "services: $*" >&2; }

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
redis_up() { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = "PONG" ]; }

wait_for() {  # wait_for NAME CHECK
  local name=$1 check=$2 i
  for ((i = 0; i < WAIT * 4; i++)); do
    if $check; then log "$name is answering"; return 0; fi
    sleep 0.25
  done
  log "$name did not answer within ${WAIT}s"
  return 1
}

install_missing() {
  local pkgs=()
  command -v pg_ctlcluster >/dev/null 2>&1 || pkgs+=(postgresql)
  command -v redis-server >/dev/null 2>&1 || pkgs+=(redis-server)
  [ ${#pkgs[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    log "missing ${pkgs[*]} and cannot install them (needs root and apt-get)"
    return 1
  fi
  log "installing ${pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${pkgs[@]}" >/dev/null
}

start_postgres() {
  pg_up && return 0
  local version
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  log "starting PostgreSQL $version"
  # The tests connect as postgres without a password over loopback.
  local hba="/etc/postgresql/$version/main/pg_hba.conf"
  if ! grep -Eq '^host[[:space:]]+all[[:space:]]+all[[:space:]]+127\.0\.0\.1/32[[:space:]]+trust' "$hba"; then
    sed -i '1i host all all 127.0.0.1/32 trust' "$hba"
  fi
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  wait_for PostgreSQL pg_up
}

ensure_test_database() {
  if ! psql -h 127.0.0.1 -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'test'" | grep -q 1; then
    log "creating database test"
    psql -h 127.0.0.1 -U postgres -d postgres -qc "CREATE DATABASE test"
  fi
}

start_redis() {
  redis_up && return 0
  log "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  wait_for Redis redis_up
}

if ! pg_up || ! redis_up; then
  install_missing
fi
start_postgres
ensure_test_database
start_redis
