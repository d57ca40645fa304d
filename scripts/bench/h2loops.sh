#!/usr/bin/env bash
# bench/h2loops.sh - the two HTTP/2 server loops side by side: one
# `spillway serve` per spillway.http2Server value (NET_HTTP on
# 127.0.0.1:18490, SPILLWAY on 127.0.0.1:18491), both in front of the
# same two bench backends (127.0.0.1:18481-18482), loaded in turn with
# h2load (h2c, prior knowledge), interleaved, ROUNDS rounds of DURATION
# seconds each. Prints req/s and the proxy's CPU per request (utime +
# stime from /proc/PID/stat, in µs) per run, then the medians and the
# SPILLWAY/NET_HTTP ratios.
#
#   scripts/bench/h2loops.sh [ROUNDS] [DURATION] [CLIENTS] [STREAMS]   (defaults 3 6 16 4)
#
# Needs h2load (nghttp2-client) and Go; builds bin/spillway and the
# backend. Linux only (/proc).
set -euo pipefail
rounds=${1:-3} dur=${2:-6} clients=${3:-16} streams=${4:-4}
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
export PATH="/usr/local/go/bin:$PATH"
go build -o bin/spillway ./cmd/spillway
(cd scripts/bench/backend && go build -o "$here/bin/bench-backend" .)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
for port in 18481 18482; do
  GOMAXPROCS=1 bin/bench-backend -addr "127.0.0.1:$port" >/dev/null 2>&1 &
  pids+=($!)
done
export BACKENDS=127.0.0.1:18481,127.0.0.1:18482
declare -A addr=([NET_HTTP]=127.0.0.1:18490 [SPILLWAY]=127.0.0.1:18491) pid=()
for loop in NET_HTTP SPILLWAY; do
  HTTP2_SERVER=$loop scripts/bench-serve.sh "${addr[$loop]}" >/dev/null 2>&1 &
  pid[$loop]=$!
  pids+=($!)
done
sleep 2
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
declare -A rps=() us=()
for r in $(seq 1 "$rounds"); do
  for loop in NET_HTTP SPILLWAY; do
    h2load -c"$clients" -m"$streams" -D 1 "http://${addr[$loop]}/" >/dev/null 2>&1 # warm
    c0=$(cpu "${pid[$loop]}")
    out=$(h2load -c"$clients" -m"$streams" -D "$dur" "http://${addr[$loop]}/")
    c1=$(cpu "${pid[$loop]}")
    done_reqs=$(awk '/^requests:/{print $8}' <<<"$out")
    v=$(awk -v d="$done_reqs" -v t="$dur" 'BEGIN{printf "%.0f", d/t}')
    u=$(awk -v c=$((c1 - c0)) -v k="$ticks" -v d="$done_reqs" 'BEGIN{printf "%.1f", c/k*1e6/d}')
    rps[$loop]+="$v " us[$loop]+="$u "
    echo "round $r $loop: $v req/s, $u µs CPU/request"
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
for loop in NET_HTTP SPILLWAY; do
  echo "median $loop: $(median <<<"${rps[$loop]}") req/s, $(median <<<"${us[$loop]}") µs CPU/request"
done
awk -v a="$(median <<<"${rps[SPILLWAY]}")" -v b="$(median <<<"${rps[NET_HTTP]}")" \
  -v c="$(median <<<"${us[SPILLWAY]}")" -v d="$(median <<<"${us[NET_HTTP]}")" \
  'BEGIN{printf "SPILLWAY/NET_HTTP: %.2fx req/s, %.2fx CPU/request\n", a/b, c/d}'
