#!/usr/bin/env bash
# bench/conns.sh - what idle client connections cost: RSS per idle
# connection, CPU while they sit idle, and how fast they open, for nginx,
# HAProxy and Spillway, one after the other in one run.
#
# Usage:
#   bench/conns.sh [--conns N] [--only LIST] [--no-h1] [--no-h2] [--silent] [--hold S]
#
#   --conns N   idle connections per measurement (default 10000; each
#               server needs N file descriptors, so N is capped by the
#               hard RLIMIT_NOFILE, see below)
#   --only LIST comma list of targets (nginx,haproxy,spillway)
#   --no-h1     skip the HTTP/1.1 keep-alive measurement
#   --no-h2     skip the HTTP/2 (h2c, prior knowledge) measurement
#   --silent    also measure connections that send nothing at all (a
#               client before its first request; each server closes them
#               at its header timeout, 30 s or more, after the window)
#   --hold S    seconds the connections sit idle before RSS and CPU are
#               read (default 10)
#
# Each connection is opened by scripts/bench/idleconns from 127.0.0.1 ..
# 127.0.0.8, sends one GET through the proxy to a bench backend, reads the
# answer and then stays open and silent. The proxy's RSS (VmRSS, summed
# over its process group) is read before and after; the difference over
# N is the cost of one idle connection, user space only (the kernel's
# socket buffers are not in RSS). "open/s" is connections opened (with
# their first request) per second, 64 at a time. SPILLWAY is the binary
# (default bin/spillway). Fixed loopback ports as in peers.sh: backends
# 18081-18083, nginx 18180/18181, haproxy 18280/18281, spillway 18480.
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=${BENCH_WORK:-${XDG_CACHE_HOME:-$HOME/.cache}/spillway-bench}
N=10000
ONLY=nginx,haproxy,spillway
DO_H1=1
DO_H2=1
DO_SILENT=0
HOLD=10
die() { echo "conns.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case "$1" in
	--conns) N=$2; shift 2 ;;
	--only) ONLY=$2; shift 2 ;;
	--no-h1) DO_H1=0; shift ;;
	--no-h2) DO_H2=0; shift ;;
	--silent) DO_SILENT=1; shift ;;
	--hold) HOLD=$2; shift 2 ;;
	-h|--help) sed -n '2,29p' "$0"; exit 0 ;;
	*) die "unknown argument: $1 (see --help)" ;;
	esac
done
LIMIT=$(ulimit -Hn)
[ "$LIMIT" = unlimited ] || [ "$N" -le $((LIMIT - 500)) ] ||
	die "--conns $N needs more file descriptors than the hard limit $LIMIT allows a process (raising it needs CAP_SYS_RESOURCE)"
ulimit -n "$LIMIT"
SPILLWAY=${SPILLWAY:-$ROOT/bin/spillway}
[ -x "$SPILLWAY" ] || die "$SPILLWAY missing: go build -o bin/spillway ./cmd/spillway"

RUN_DIR=$WORK/run/conns-$(date +%Y%m%d-%H%M%S)-$$
mkdir -p "$RUN_DIR" "$WORK/bin"
echo "building backend and idleconns"
(cd "$HERE/backend" && go build -trimpath -o "$WORK/bin/backend" .) || die "backend build failed"
(cd "$ROOT" && go build -trimpath -o "$WORK/bin/idleconns" ./scripts/bench/idleconns) || die "idleconns build failed"

. "$HERE/lib.sh"

rss_kb() { # PGID: summed VmRSS of the group's processes
	local p s=0 r
	for p in $(pgrep -g "$1"); do
		r=$(awk '/^VmRSS/{print $2}' "/proc/$p/status" 2>/dev/null) && s=$((s + ${r:-0}))
	done
	echo $s
}

for p in 18081 18082 18083; do start "backend$p" env GOMAXPROCS=1 "$WORK/bin/backend" -addr "127.0.0.1:$p" -zone z; done
for p in 18081 18082 18083; do wait_ready "http://127.0.0.1:$p/"; done
export BACKENDS=127.0.0.1:18081,127.0.0.1:18082,127.0.0.1:18083

start_target() { # NAME: starts it, sets TPID, H1, H2
	local conf=$RUN_DIR/$1
	mkdir -p "$conf"
	case $1 in
	nginx)
		mkdir -p "$conf/tmp"
		sed -e "s/worker_rlimit_nofile [0-9]*/worker_rlimit_nofile $LIMIT/" \
			-e "s/worker_connections [0-9]*/worker_connections $((N + 200))/" "$HERE/conf/nginx.conf" >"$conf/nginx.conf"
		start nginx nginx -p "$conf/" -c "$conf/nginx.conf" -e "$conf/error.log" -g 'daemon off;'
		H1=127.0.0.1:18180 H2=127.0.0.1:18181 ;;
	haproxy)
		sed -e "s/maxconn [0-9]*/maxconn $((N + 200))/" "$HERE/conf/haproxy.cfg" >"$conf/haproxy.cfg"
		start haproxy haproxy -db -f "$conf/haproxy.cfg"
		H1=127.0.0.1:18280 H2=127.0.0.1:18281 ;;
	spillway)
		start spillway env SPILLWAY="$SPILLWAY" "$ROOT/scripts/bench-serve.sh" 127.0.0.1:18480
		H1=127.0.0.1:18480 H2=127.0.0.1:18480 ;;
	*) die "unknown target $1" ;;
	esac
	TPID=${PIDS[-1]}
	wait_ready "http://$H1/"
}

measure() { # NAME KIND ADDR
	local t=$1 kind=$2 addr=$3 out="$RUN_DIR/$1-$2.txt" r0 r1 c0 c1 icp i
	sleep 2
	r0=$(rss_kb "$TPID")
	"$WORK/bin/idleconns" -addr "$addr" -n "$N" -hold 1h $([ "$kind" = h2 ] && echo -h2) $([ "$kind" = silent ] && echo -silent) >"$out" 2>&1 &
	icp=$!
	for ((i = 0; i < 1200; i++)); do grep -q '^open' "$out" 2>/dev/null && break; sleep 0.1; done
	sleep 2
	c0=$(cpu_ticks "$TPID")
	sleep "$HOLD"
	c1=$(cpu_ticks "$TPID")
	r1=$(rss_kb "$TPID")
	kill "$icp"; wait "$icp" 2>/dev/null
	awk -v t="$t" -v k="$kind" -v n="$N" -v r0="$r0" -v r1="$r1" -v c="$((c1 - c0))" -v hz="$(getconf CLK_TCK)" -v hold="$HOLD" -v line="$(head -1 "$out")" '
		BEGIN { split(line, f, " "); el = f[6]; sub(/s$/, "", el); if (el ~ /ms$/) { sub(/ms$/, "", el); el /= 1000 }
			printf "| %-8s | %-5s | %6d | %6d | %9.0f | %8.1f | %7.0f | %8.2f |\n", t, k, f[2], f[4], r0, r1 / 1024, (r1 - r0) * 1024 / n, c * 100 / hz / hold }'
}

echo "machine: $(nproc) CPUs, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo); fd hard limit $LIMIT; $N connections"
echo "| target   | proto | open   | failed | RSS0 kB   | RSS MiB  | B/conn  | idle CPU% |"
echo "|---|---|---|---|---|---|---|---|"
IFS=, read -ra TARGETS <<<"$ONLY"
for t in "${TARGETS[@]}"; do
	start_target "$t"
	[ $DO_H1 = 1 ] && measure "$t" h1 "$H1"
	[ $DO_H2 = 1 ] && measure "$t" h2 "$H2"
	[ $DO_SILENT = 1 ] && measure "$t" silent "$H1"
	stop "$TPID"
done
echo "(B/conn = (RSS with N idle connections - RSS before) / N; idle CPU% = the proxy's CPU over --hold seconds with them open; raw output in $RUN_DIR)"
