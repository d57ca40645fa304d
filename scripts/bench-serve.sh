#!/usr/bin/env bash
# Starts `spillway serve` as a round-robin proxy in front of the bench
# backends, for scripts/bench/peers.sh-style runs:
#
#   peers.sh --extra spillway 127.0.0.1:18480 \
#     "$PWD/scripts/bench-serve.sh 127.0.0.1:18480" --extra-h2 spillway 127.0.0.1:18480
#
# BACKENDS (comma list of host:port) comes from peers.sh; SPILLWAY is the
# binary (default: bin/spillway next to this script's repo). HTTP1_SERVER
# (SPILLWAY or NET_HTTP), when set, becomes spillway: {http1Server: ...},
# and HTTP2_SERVER likewise spillway: {http2Server: ...};
# PROCS, when set, is passed as --procs (default auto). OBS=off turns the
# request metrics off (spillway: {requestMetrics: false}); OBS=on keeps
# them and adds the JSON access log, written to access.log in the
# script's mktemp directory (delete it after the run); unset keeps the
# defaults (metrics on, no access log). TLS_CERT and TLS_KEY (PEM files),
# when set, make the frontend HTTPS with that certificate. WAF=1 attaches
# a security policy with Cloud Armor's usual pair of preconfigured WAF
# rules, sqli-v33-stable and xss-v33-stable at sensitivity 1
# (scripts/bench/waf.sh).
set -euo pipefail
listen=${1:?usage: bench-serve.sh LISTEN_ADDR}
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${SPILLWAY:-$here/bin/spillway}
dir=$(mktemp -d)
cfg=$dir/bench.yaml
{
  echo "networkEndpointGroups:"
  echo "- name: neg-bench"
  echo "  zone: us-east1-b"
  echo "  endpoints:"
  IFS=, read -ra list <<<"${BACKENDS:?BACKENDS not set}"
  for b in "${list[@]}"; do echo "  - {ipAddress: ${b%:*}, port: ${b##*:}}"; done
  echo "backendServices:"
  echo "- name: bs-bench"
  echo "  backends: [{group: neg-bench, balancingMode: RATE, maxRatePerEndpoint: 1000000}]"
  if [ -n "${WAF:-}" ]; then
    echo "  securityPolicy: waf-bench"
    echo "securityPolicies:"
    echo "- name: waf-bench"
    echo "  rules:"
    echo "  - {priority: 1000, action: deny(403), match: {expr: {expression: \"evaluatePreconfiguredWaf('sqli-v33-stable', {'sensitivity': 1})\"}}}"
    echo "  - {priority: 1001, action: deny(403), match: {expr: {expression: \"evaluatePreconfiguredWaf('xss-v33-stable', {'sensitivity': 1})\"}}}"
    echo "  - {priority: 2147483647, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}"
  fi
  echo "urlMaps:"
  echo "- {name: um-bench, defaultService: bs-bench}"
  echo "frontends:"
  if [ -n "${TLS_CERT:-}" ]; then
    echo "- name: fe-bench"
    echo "  address: \"$listen\""
    echo "  protocol: HTTPS"
    echo "  urlMap: um-bench"
    echo "  region: us-east1"
    echo "  certificates: [{certificateFile: $TLS_CERT, privateKeyFile: ${TLS_KEY:?TLS_KEY not set}}]"
  else
    echo "- {name: fe-bench, address: \"$listen\", protocol: HTTP, urlMap: um-bench, region: us-east1}"
  fi
  tuning=()
  if [ -n "${HTTP1_SERVER:-}" ]; then tuning+=("http1Server: $HTTP1_SERVER"); fi
  if [ -n "${HTTP2_SERVER:-}" ]; then tuning+=("http2Server: $HTTP2_SERVER"); fi
  case "${OBS:-}" in
  off) tuning+=("requestMetrics: false") ;;
  on) tuning+=("accessLog: {enable: true, path: $dir/access.log, format: JSON}") ;;
  esac
  if [ ${#tuning[@]} -gt 0 ]; then
    echo "spillway:"
    for t in "${tuning[@]}"; do echo "  $t"; done
  fi
} >"$cfg"
exec "$bin" serve --config "$cfg" --admin "" --watch 0 --log-level warn ${PROCS:+--procs "$PROCS"}
