#!/usr/bin/env bash
# bench/h3.sh - HTTP/3 beside HTTP/2 over TLS: spillway serve (one HTTPS
# frontend with quicOverride ENABLE) and Caddy (h1 h2 h3), both proxying
# to the Go bench backends, loaded by h3load (-proto h3 and -proto h2),
# interleaved rounds, medians. Prints one h3load line per run and a table
# of medians: req/s, p50/p99 latency, proxy CPU us per request (from
# /proc/PID/stat).
#
#   scripts/bench/h3.sh [--duration 10s] [--repeats 3] [--conns 16] [--streams 4] [--no-caddy]
#
# Loopback only; ports: backends 18081-18083 (like peers.sh), spillway
# 18543 (TCP + UDP), caddy 18643 (TCP + UDP). Scratch under $BENCH_WORK
# (default ~/.cache/spillway-bench). Every process it starts is stopped by
# PID at exit. Needs openssl, taskset, caddy (optional) and Go.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
DURATION=10s REPEATS=3 CONNS=16 STREAMS=4 CADDY=1
while [ $# -gt 0 ]; do
	case "$1" in
	--duration) DURATION=$2; shift 2 ;;
	--repeats) REPEATS=$2; shift 2 ;;
	--conns) CONNS=$2; shift 2 ;;
	--streams) STREAMS=$2; shift 2 ;;
	--no-caddy) CADDY=0; shift ;;
	-h | --help) sed -n 2,15p "$0"; exit 0 ;;
	*) echo "unknown option $1" >&2; exit 2 ;;
	esac
done
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
WORK=${BENCH_WORK:-$HOME/.cache/spillway-bench}
RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/h3bench.XXXXXX")
mkdir -p "$WORK/bin"
if ! command -v caddy >/dev/null; then CADDY=0; fi

PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# start NAME CMD...: runs CMD in the background, logging to RUN_DIR/NAME.log.
start() {
	local name=$1
	shift
	"$@" >"$RUN_DIR/$name.log" 2>&1 </dev/null &
	PIDS+=($!)
	LAST_PID=$!
}

wait_tcp() {
	for _ in $(seq 100); do
		if (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	echo "$2 did not listen on $1; log:" >&2
	cat "$RUN_DIR/$2.log" >&2
	exit 1
}

echo "building backend, spillway, h3load"
(cd "$HERE/backend" && "$GO" build -trimpath -o "$WORK/bin/backend" .)
(cd "$REPO" && "$GO" build -trimpath -o "$WORK/bin/spillway" ./cmd/spillway && "$GO" build -trimpath -o "$WORK/bin/h3load" ./scripts/bench/h3load)

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
	-subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
	-keyout "$RUN_DIR/key.pem" -out "$RUN_DIR/cert.pem" 2>/dev/null

for i in 1 2 3; do
	start "backend$i" env GOMAXPROCS=1 "$WORK/bin/backend" -addr "127.0.0.1:1808$i" -zone "us-east1-$i"
	wait_tcp "127.0.0.1:1808$i" "backend$i"
done

cat >"$RUN_DIR/spillway.yaml" <<EOF
networkEndpointGroups:
- name: neg-bench
  zone: us-east1-b
  endpoints:
  - {ipAddress: 127.0.0.1, port: 18081}
  - {ipAddress: 127.0.0.1, port: 18082}
  - {ipAddress: 127.0.0.1, port: 18083}
backendServices:
- name: bs-bench
  backends: [{group: neg-bench, balancingMode: RATE, maxRatePerEndpoint: 1000000}]
urlMaps:
- {name: um-bench, defaultService: bs-bench}
frontends:
- name: fe-bench
  address: "127.0.0.1:18543"
  protocol: HTTPS
  urlMap: um-bench
  region: us-east1
  quicOverride: ENABLE
  certificates: [{certificateFile: $RUN_DIR/cert.pem, privateKeyFile: $RUN_DIR/key.pem}]
EOF
start spillway "$WORK/bin/spillway" serve --config "$RUN_DIR/spillway.yaml" --admin "" --watch 0 --log-level warn
SPILLWAY_PID=$LAST_PID
wait_tcp 127.0.0.1:18543 spillway

if [ "$CADDY" = 1 ]; then
	cat >"$RUN_DIR/Caddyfile" <<EOF
{
	admin off
	auto_https off
	skip_install_trust
	servers {
		protocols h1 h2 h3
	}
}
https://localhost:18643, https://127.0.0.1:18643 {
	bind 127.0.0.1
	tls $RUN_DIR/cert.pem $RUN_DIR/key.pem
	reverse_proxy 127.0.0.1:18081 127.0.0.1:18082 127.0.0.1:18083 {
		lb_policy round_robin
		transport http {
			versions 1.1
			keepalive 60s
			keepalive_idle_conns 256
			keepalive_idle_conns_per_host 64
		}
	}
}
EOF
	start caddy env HOME="$RUN_DIR" XDG_DATA_HOME="$RUN_DIR" XDG_CONFIG_HOME="$RUN_DIR" \
		caddy run --config "$RUN_DIR/Caddyfile" --adapter caddyfile
	CADDY_PID=$LAST_PID
	wait_tcp 127.0.0.1:18643 caddy
fi

echo "machine: $(nproc) CPUs, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo) | $("$GO" version | awk '{print $3}') | caddy $(caddy version 2>/dev/null | awk '{print $1}')"
echo "load: h3load -c $CONNS -m $STREAMS -d $DURATION, pinned to CPU 1 (taskset); servers float"
if command -v h2load >/dev/null; then
	# Debian's nghttp2-client is built without ngtcp2/nghttp3: with
	# --npn-list h3 it still connects over TCP and the TLS handshake
	# offers only h3, which the server refuses (no application protocol).
	echo "h2load --npn-list h3 (nghttp2 $(h2load --version | awk '{print $2}')): $(timeout 20 h2load --npn-list h3 -n 10 -c 1 https://127.0.0.1:18543/ 2>&1 | grep -E 'requests:|Application protocol|No protocol|error' | head -3 | tr '\n' ' ')"
fi
targets=("spillway h3 $SPILLWAY_PID 18543" "spillway h2 $SPILLWAY_PID 18543")
if [ "$CADDY" = 1 ]; then targets+=("caddy h3 $CADDY_PID 18643" "caddy h2 $CADDY_PID 18643"); fi
: >"$RUN_DIR/results"
for r in $(seq "$REPEATS"); do
	for t in "${targets[@]}"; do
		read -r name proto pid port <<<"$t"
		line=$(taskset -c 1 "$WORK/bin/h3load" -proto "$proto" -c "$CONNS" -m "$STREAMS" -d "$DURATION" \
			-cacert "$RUN_DIR/cert.pem" -pid "$pid" "https://127.0.0.1:$port/")
		echo "round $r $name $line"
		echo "$name $line" >>"$RUN_DIR/results"
	done
done

echo
echo "medians of $REPEATS interleaved rounds:"
printf '%-9s %-5s %9s %9s %9s %12s\n' target proto req/s p50 p99 proxy_us/r
for t in "${targets[@]}"; do
	read -r name proto _ _ <<<"$t"
	grep "^$name proto=$proto " "$RUN_DIR/results" | awk -v n="$name" -v p="$proto" '
	function med(a, k,   i, j, x) { for (i = 2; i <= k; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j+1] = a[j]; a[j+1] = x } return k % 2 ? a[(k+1)/2] : (a[k/2] + a[k/2+1]) / 2 }
	{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v = kv[2]; sub(/ms$/, "", v); f[kv[1], NR] = v + 0 } }
	END {
		for (i = 1; i <= NR; i++) { a[i] = f["req/s", i]; b[i] = f["p50", i]; c[i] = f["p99", i]; d[i] = f["cpu_us_per_req", i] }
		printf "%-9s %-5s %9.0f %7.2fms %7.2fms %12.1f\n", n, p, med(a, NR), med(b, NR), med(c, NR), med(d, NR)
	}'
done
echo "(raw output and logs: $RUN_DIR)"
