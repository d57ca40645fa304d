#!/usr/bin/env bash
# Starts `spillway serve` as an authoritative GSLB server for the
# scripts/bench/dns-peers.sh zone (gslb.example, www = 70/20/10 weighted,
# no health checks, like the gdnsd and PowerDNS rows):
#
#   dns-peers.sh --extra spillway 127.0.0.1:15380 "$PWD/scripts/bench-dns.sh 127.0.0.1:15380"
#
# SPILLWAY is the binary (default: bin/spillway next to this script's
# repo); PROCS, when set, is passed as --procs (default auto). SIGNED=1
# signs the zone (DNSSEC, a fresh key from spillway dnssec keygen); run
# dns-peers.sh with --dnssec so queries ask for the signatures:
#
#   dns-peers.sh --dnssec --only spillway,spillway-signed \
#     --extra spillway 127.0.0.1:15380 "$PWD/scripts/bench-dns.sh 127.0.0.1:15380" \
#     --extra spillway-signed 127.0.0.1:15381 "SIGNED=1 $PWD/scripts/bench-dns.sh 127.0.0.1:15381"
#
# RRL=N turns on response rate limiting at N responses per second per
# client prefix (spillway.dnsResponseRateLimit, slip 2; dnsperf's
# queries all come from 127.0.0.1, one prefix); SIGCAP=N caps fresh
# denial signatures at N per second (spillway.dnsMaxDenialSignaturesPerSecond).
# With dns-peers.sh --random-names they show what a random-subdomain flood
# costs (see dns-peers.sh --help).
set -euo pipefail
listen=${1:?usage: bench-dns.sh LISTEN_ADDR}
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${SPILLWAY:-$here/bin/spillway}
dir=$(mktemp -d)
cat >"$dir/dns.yaml" <<YAML
frontends:
- {name: dns, address: "$listen", protocol: DNS}
dnsZones:
- name: gslb.example.
  soa: {mname: ns1.gslb.example., rname: hostmaster.gslb.example., serial: 1, minimum: 30}
  nameServers: [ns1.gslb.example.]
  records:
  - {name: ns1, type: A, rrdatas: ["127.0.0.1"]}
  - {name: static, type: A, rrdatas: ["127.0.0.11"]}
  gslbNames:
  - name: www
    policy: WEIGHTED
    pool:
      members:
      - {name: zone-a, address: 127.0.0.11, weight: 70}
      - {name: zone-b, address: 127.0.0.12, weight: 20}
      - {name: zone-c, address: 127.0.0.13, weight: 10}
YAML
if [ "${SIGNED:-0}" = 1 ]; then
  "$bin" dnssec keygen --zone gslb.example. --out "$dir/gslb.example.key" >/dev/null
  sed -i "s|^  nameServers: \[ns1.gslb.example.\]\$|&\n  dnssec: {keyFile: $dir/gslb.example.key}|" "$dir/dns.yaml"
fi
if [ -n "${RRL:-}${SIGCAP:-}" ]; then
  echo "spillway:" >>"$dir/dns.yaml"
  [ -n "${RRL:-}" ] && echo "  dnsResponseRateLimit: {responsesPerSecond: $RRL}" >>"$dir/dns.yaml"
  [ -n "${SIGCAP:-}" ] && echo "  dnsMaxDenialSignaturesPerSecond: $SIGCAP" >>"$dir/dns.yaml"
fi
exec "$bin" serve --config "$dir/dns.yaml" --admin "" --watch 0 --log-level warn ${PROCS:+--procs "$PROCS"}
