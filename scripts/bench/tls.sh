#!/usr/bin/env bash
# bench/tls.sh - TLS handshakes per second, full and resumed, with an
# ECDSA P-256 and an RSA-2048 certificate, for nginx, HAProxy and
# Spillway, side by side in one run.
#
# Usage:
#   bench/tls.sh [--duration S] [--repeats N] [--clients N] [--only LIST]
#
#   --duration S  seconds per measurement (default 8)
#   --repeats N   interleaved repeats per target, median reported (default 3)
#   --clients N   parallel `openssl s_time` clients (default 2)
#   --only LIST   comma list of targets (nginx,haproxy,spillway)
#
# Each measurement runs N `openssl s_time` clients (pinned to CPU 1, the
# servers float) against the target's HTTPS listener, asking for / each
# time: `-new` makes every connection a full handshake, `-reuse` resumes
# the first connection's session (a TLS 1.3 ticket) on every other one.
# "hs/s" is connections completed per second, summed over the clients;
# "µs/hs" is the target's CPU time (user+system of its process group) per
# connection. The certificates are made here with openssl (self-signed,
# CN=bench.test). SPILLWAY is the binary (default bin/spillway). Fixed
# loopback ports: backends 18081-18083, nginx 18190, haproxy 18290,
# spillway 18490.
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=${BENCH_WORK:-${XDG_CACHE_HOME:-$HOME/.cache}/spillway-bench}
DURATION=8
REPEATS=3
CLIENTS=2
ONLY=nginx,haproxy,spillway
die() { echo "tls.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case "$1" in
	--duration) DURATION=$2; shift 2 ;;
	--repeats) REPEATS=$2; shift 2 ;;
	--clients) CLIENTS=$2; shift 2 ;;
	--only) ONLY=$2; shift 2 ;;
	-h|--help) sed -n '2,23p' "$0"; exit 0 ;;
	*) die "unknown argument: $1 (see --help)" ;;
	esac
done
for t in openssl taskset curl; do command -v $t >/dev/null || die "$t not installed"; done
SPILLWAY=${SPILLWAY:-$ROOT/bin/spillway}
[ -x "$SPILLWAY" ] || die "$SPILLWAY missing: go build -o bin/spillway ./cmd/spillway"

RUN_DIR=$WORK/run/tls-$(date +%Y%m%d-%H%M%S)-$$
mkdir -p "$RUN_DIR" "$WORK/bin"
(cd "$HERE/backend" && go build -trimpath -o "$WORK/bin/backend" .) || die "backend build failed"

for kind in ecdsa rsa; do
	if [ $kind = ecdsa ]; then alg=(-newkey ec -pkeyopt ec_paramgen_curve:P-256); else alg=(-newkey rsa:2048); fi
	openssl req -x509 "${alg[@]}" -nodes -days 2 -subj /CN=bench.test -keyout "$RUN_DIR/$kind.key" -out "$RUN_DIR/$kind.crt" 2>/dev/null ||
		die "openssl could not make the $kind certificate"
	cat "$RUN_DIR/$kind.crt" "$RUN_DIR/$kind.key" >"$RUN_DIR/$kind.pem"
done

. "$HERE/lib.sh"
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{ if (NR%2) print a[(NR+1)/2]; else printf "%.1f\n", (a[NR/2]+a[NR/2+1])/2 }'; }

for p in 18081 18082 18083; do start "backend$p" env GOMAXPROCS=1 "$WORK/bin/backend" -addr "127.0.0.1:$p" -zone z; done
export BACKENDS=127.0.0.1:18081,127.0.0.1:18082,127.0.0.1:18083

start_target() { # TARGET KIND: sets TPID, ADDR
	local t=$1 kind=$2 d=$RUN_DIR/$1-$2
	mkdir -p "$d"
	case $t in
	nginx)
		mkdir -p "$d/tmp"
		cat >"$d/nginx.conf" <<NGINX
worker_processes 2;
pid nginx.pid;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path tmp/cb; proxy_temp_path tmp/p; fastcgi_temp_path tmp/f; uwsgi_temp_path tmp/u; scgi_temp_path tmp/s;
    upstream pool { server 127.0.0.1:18081; server 127.0.0.1:18082; server 127.0.0.1:18083; keepalive 64; }
    server {
        listen 127.0.0.1:18190 ssl;
        ssl_certificate $RUN_DIR/$kind.crt;
        ssl_certificate_key $RUN_DIR/$kind.key;
        ssl_protocols TLSv1.3;
        ssl_session_tickets on;
        location / { proxy_pass http://pool; proxy_http_version 1.1; proxy_set_header Connection ""; }
    }
}
NGINX
		start "nginx-$kind" nginx -p "$d/" -c "$d/nginx.conf" -e "$d/error.log" -g 'daemon off;'
		ADDR=127.0.0.1:18190 ;;
	haproxy)
		cat >"$d/haproxy.cfg" <<HAPROXY
global
    nbthread 2
    maxconn 8000
    ssl-default-bind-options ssl-min-ver TLSv1.3
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend fe
    bind 127.0.0.1:18290 ssl crt $RUN_DIR/$kind.pem
    default_backend pool
backend pool
    balance roundrobin
    http-reuse always
    server b1 127.0.0.1:18081
    server b2 127.0.0.1:18082
    server b3 127.0.0.1:18083
HAPROXY
		start "haproxy-$kind" haproxy -db -f "$d/haproxy.cfg"
		ADDR=127.0.0.1:18290 ;;
	spillway)
		start "spillway-$kind" env SPILLWAY="$SPILLWAY" TLS_CERT="$RUN_DIR/$kind.crt" TLS_KEY="$RUN_DIR/$kind.key" \
			"$ROOT/scripts/bench-serve.sh" 127.0.0.1:18490
		ADDR=127.0.0.1:18490 ;;
	*) die "unknown target $t" ;;
	esac
	TPID=${PIDS[-1]}
	wait_ready "https://$ADDR/"
}

run_stime() { # MODE(-new|-reuse): prints connections/s summed over the clients, and the CPU ticks
	local mode=$1 i c0 c1 total=0 out
	c0=$(cpu_ticks "$TPID")
	for ((i = 0; i < CLIENTS; i++)); do
		taskset -c 1 openssl s_time -connect "$ADDR" -www / $mode -time "$DURATION" -tls1_3 >"$RUN_DIR/stime-$i.txt" 2>&1 &
	done
	wait $(jobs -p | tail -n "$CLIENTS")
	c1=$(cpu_ticks "$TPID")
	for ((i = 0; i < CLIENTS; i++)); do
		out=$(awk '/connections in [0-9.]+s;/{print $1; exit}' "$RUN_DIR/stime-$i.txt")
		total=$((total + ${out:-0}))
	done
	echo "$total $((c1 - c0))"
}

HZ=$(getconf CLK_TCK)
declare -A HS=() CPU=()
IFS=, read -ra TARGETS <<<"$ONLY"
echo "machine: $(nproc) CPUs; $CLIENTS openssl s_time clients on CPU 1, ${DURATION}s x $REPEATS interleaved; $(openssl version | awk '{print $1, $2}'), $(nginx -v 2>&1 | sed 's/.*: //'), haproxy $(haproxy -v | awk 'NR==1{print $3}')"
for kind in ecdsa rsa; do
	for ((r = 1; r <= REPEATS; r++)); do
		for t in "${TARGETS[@]}"; do
			start_target "$t" "$kind"
			for mode in -new -reuse; do
				read -r n ticks < <(run_stime $mode)
				key="$t $kind $mode"
				HS[$key]+="$(awk -v n="$n" -v d="$DURATION" 'BEGIN{printf "%.1f", n/d}') "
				CPU[$key]+="$(awk -v t="$ticks" -v n="$n" -v hz="$HZ" 'BEGIN{ if (n > 0) printf "%.1f", t*1e6/hz/n; else print 0 }') "
			done
			stop "$TPID"
		done
	done
done
echo "| certificate | handshake | target | hs/s (median) | × HAProxy | µs/hs (target CPU) |"
echo "|---|---|---|---|---|---|"
for kind in ecdsa rsa; do
	for mode in -new -reuse; do
		base=$(median ${HS["haproxy $kind $mode"]:-0})
		for t in "${TARGETS[@]}"; do
			key="$t $kind $mode"
			m=$(median ${HS[$key]})
			printf '| %s | %s | %s | %s | %s | %s |\n' "$([ $kind = ecdsa ] && echo 'ECDSA P-256' || echo 'RSA-2048')" \
				"$([ $mode = -new ] && echo full || echo resumed)" "$t" "$m" \
				"$(awk -v a="$m" -v b="$base" 'BEGIN{ if (b > 0) printf "%.2f", a/b; else print "-" }')" "$(median ${CPU[$key]})"
		done
	done
done
echo "(raw output in $RUN_DIR)"
