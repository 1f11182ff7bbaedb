#!/usr/bin/env bash
# Installs what `make bench` needs when it is missing: dnsperf, wrk and
# gnuplot from Debian (and patroni and etcd-server for the Patroni
# switchovers of the failover section), CoreDNS with go install (about 3 minutes the first
# time), the PostgreSQL server binaries.
set -euo pipefail
need=()
command -v dnsperf >/dev/null 2>&1 || need+=(dnsperf)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
command -v gnuplot >/dev/null 2>&1 || need+=(gnuplot-nox)
command -v patroni >/dev/null 2>&1 || need+=(patroni)
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
if ((${#need[@]})); then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
if ! command -v coredns >/dev/null 2>&1 && [ ! -x "$(go env GOPATH)/bin/coredns" ]; then
  (cd /tmp && go install github.com/coredns/coredns@v1.11.3)
fi
