#!/usr/bin/env bash
# bench/cdn.sh - Cloud CDN's cache beside its peers, in one run: Spillway
# (enableCDN), nginx proxy_cache and, when installed, Varnish, in front of
# the same origin.
#
# Usage:
#   bench/cdn.sh [--duration D] [--repeats N] [--conns N] [--storm N] [--only LIST]
#
#   --duration D  wrk duration per measurement (default 10s)
#   --repeats N   interleaved repeats per target, median reported (default 3)
#   --conns N     wrk connections for the hit measurements (default 64)
#   --storm N     clients of the miss storm (default 1000)
#   --only LIST   comma list of targets (spillway,nginx,varnish)
#
# Three measurements per target and repeat, interleaved across targets:
#   hits 1k / hits 1m: wrk -t2 -cN on one object already cached (1 KiB or
#     1 MiB, Cache-Control: public, max-age=3600): hits per second, the
#     target's CPU time (user+system of its process group, from /proc) per
#     hit, p50/p99, and the origin's requests for the object during the
#     run (0: every answer was a hit).
#   storm: N clients (each its own connection) ask at once for a cold key
#     whose origin answer takes 1 s; the origin counts the requests it got
#     for that key (1: the misses were coalesced).
# wrk and the storm client run on CPU 1; the targets float on both CPUs.
# The origin is scripts/bench/cdnorigin (Go, built here). SPILLWAY is the
# binary (default bin/spillway: go build -o bin/spillway ./cmd/spillway).
# Fixed loopback ports: origin 18590, spillway 18580, nginx 18581,
# varnish 18582. Stores: Spillway 256 MiB in memory; nginx its cache
# directory (in the page cache) with a 16 MiB key zone; Varnish malloc
# 256 MiB.
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=${BENCH_WORK:-${XDG_CACHE_HOME:-$HOME/.cache}/spillway-bench}
DURATION=10s
REPEATS=3
CONNS=64
STORM=1000
ONLY=spillway,nginx,varnish
die() { echo "cdn.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case "$1" in
	--duration) DURATION=$2; shift 2 ;;
	--repeats) REPEATS=$2; shift 2 ;;
	--conns) CONNS=$2; shift 2 ;;
	--storm) STORM=$2; shift 2 ;;
	--only) ONLY=$2; shift 2 ;;
	-h|--help) sed -n '2,31p' "$0"; exit 0 ;;
	*) die "unknown argument: $1 (see --help)" ;;
	esac
done
for t in wrk taskset curl nginx go; do command -v $t >/dev/null || die "$t not installed"; done
SPILLWAY=${SPILLWAY:-$ROOT/bin/spillway}
[ -x "$SPILLWAY" ] || die "$SPILLWAY missing: go build -o bin/spillway ./cmd/spillway"
[ "$(ulimit -n)" -ge $((STORM * 3)) ] || ulimit -n $((STORM * 3 + 1024)) 2>/dev/null || die "ulimit -n too low for $STORM clients"

RUN_DIR=$WORK/run/cdn-$(date +%Y%m%d-%H%M%S)-$$
mkdir -p "$RUN_DIR" "$WORK/bin"
(cd "$HERE/cdnorigin" && go build -trimpath -o "$WORK/bin/cdnorigin" .) || die "cdnorigin build failed"
ORIGIN=127.0.0.1:18590
declare -A ADDR=([spillway]=127.0.0.1:18580 [nginx]=127.0.0.1:18581 [varnish]=127.0.0.1:18582)
TARGETS=()
IFS=, read -ra WANT <<<"$ONLY"
for t in "${WANT[@]}"; do
	case $t in
	spillway | nginx) TARGETS+=("$t") ;;
	varnish) if command -v varnishd >/dev/null; then TARGETS+=(varnish); else echo "varnishd not installed: no varnish row (apt-get install -y varnish)"; fi ;;
	*) die "unknown target $t" ;;
	esac
done

port_open() { (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }
for a in $ORIGIN "${ADDR[@]}"; do port_open "$a" && die "$a already in use (leftover process?)"; done

# ---------------------------------------------------------------- processes
PIDS=() # every PID started here; each leads its own session and process group
start() { # NAME CMD...: in its own session, output to RUN_DIR/NAME.log
	local name=$1; shift
	setsid "$@" >"$RUN_DIR/$name.log" 2>&1 </dev/null &
	PIDS+=($!)
}
stop_all() {
	local pid i alive
	for pid in "${PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
	for ((i = 0; i < 50; i++)); do
		alive=0
		for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
		[ $alive = 0 ] && break
		sleep 0.1
	done
	for pid in "${PIDS[@]}"; do kill -KILL -- "-$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
	[ ${#PIDS[@]} -gt 0 ] && echo "stopped process groups: ${PIDS[*]}"
	PIDS=()
}
trap stop_all EXIT
trap 'exit 130' INT TERM
wait_ready() { # ADDR NAME
	local i
	for ((i = 0; i < 100; i++)); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://$1/")" = 200 ] && return 0
		sleep 0.1
	done
	echo "!! $2 at $1 did not become ready; log:"; tail -20 "$RUN_DIR/$2.log"
	exit 1
}

HZ=$(getconf CLK_TCK)
cpu_ticks() { # PGID: user+system ticks of the live processes of that process group
	cat /proc/[0-9]*/stat 2>/dev/null | awk -v g="$1" '{ sub(/^.*\) /, ""); split($0, f, " "); if (f[3] == g) s += f[12] + f[13] } END { print s + 0 }'
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{ if (NR%2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2 }'; }
to_ms() { awk -v v="$1" 'BEGIN{ n=v+0; if (v ~ /us$/) n/=1000; else if (v ~ /ms$/) n=n; else if (v ~ /s$/) n*=1000; printf "%.3f", n }'; }
origin_count() { curl -s --max-time 2 "http://$ORIGIN/_count$1"; }

# ---------------------------------------------------------------- targets
start origin taskset -c 0 "$WORK/bin/cdnorigin" -addr $ORIGIN -delay 1s
declare -A PG=()
PG[origin]=${PIDS[-1]}
wait_ready $ORIGIN origin

for t in "${TARGETS[@]}"; do
	d=$RUN_DIR/$t
	mkdir -p "$d"
	case $t in
	spillway)
		cat >"$d/spillway.yaml" <<YAML
networkEndpointGroups:
- name: neg-origin
  zone: us-east1-b
  endpoints: [{ipAddress: 127.0.0.1, port: ${ORIGIN##*:}}]
backendServices:
- name: bs-cdn
  backends: [{group: neg-origin, balancingMode: RATE, maxRatePerEndpoint: 1000000}]
  enableCDN: true
  cdnPolicy: {cacheMode: USE_ORIGIN_HEADERS, requestCoalescing: true}
urlMaps:
- {name: um-cdn, defaultService: bs-cdn}
frontends:
- {name: fe-cdn, address: "${ADDR[spillway]}", protocol: HTTP, urlMap: um-cdn, region: us-east1}
spillway:
  cdn: {memoryBytes: 268435456}
YAML
		start spillway "$SPILLWAY" serve --config "$d/spillway.yaml" --admin "" --watch 0 --log-level warn ;;
	nginx)
		mkdir -p "$d/tmp" "$d/cache"
		cat >"$d/nginx.conf" <<NGINX
user $(id -un);
worker_processes 2;
pid nginx.pid;
worker_rlimit_nofile 16384;
events { worker_connections 8192; }
http {
    access_log off;
    client_body_temp_path tmp/cb; proxy_temp_path tmp/p; fastcgi_temp_path tmp/f; uwsgi_temp_path tmp/u; scgi_temp_path tmp/s;
    keepalive_requests 1000000;
    proxy_cache_path $d/cache levels=1:2 keys_zone=cdn:16m max_size=1g inactive=1h use_temp_path=off;
    upstream origin { server $ORIGIN; keepalive 64; }
    server {
        listen ${ADDR[nginx]} backlog=4096;
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache cdn;
            proxy_cache_lock on;
            proxy_cache_lock_timeout 30s;
            proxy_cache_lock_age 30s;
            add_header X-Cache-Status \$upstream_cache_status;
        }
    }
}
NGINX
		start nginx nginx -p "$d/" -c "$d/nginx.conf" -e "$d/error.log" -g 'daemon off;' ;;
	varnish)
		jail=(); [ "$(id -u)" = 0 ] && jail=(-j none)
		start varnish varnishd -F "${jail[@]}" -n "$d/work" -a "${ADDR[varnish]}" -b "$ORIGIN" -s malloc,256m -T none \
			-p listen_depth=4096 ;;
	esac
	PG[$t]=${PIDS[-1]}
	wait_ready "${ADDR[$t]}" "$t"
done

echo "=== cdn.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) ==="
echo "host: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), kernel $(uname -r)"
echo "versions: spillway $("$SPILLWAY" version 2>/dev/null | head -1) | $(nginx -v 2>&1 | sed 's/.*: //') | $(command -v varnishd >/dev/null && varnishd -V 2>&1 | head -1 | awk '{print $1, $2}' | tr -d '(') | $(wrk -v 2>&1 | awk 'NR==1{print $1, $2}')"
echo "settings: wrk -t2 -c$CONNS -d$DURATION --latency on CPU 1; repeats=$REPEATS interleaved; storm $STORM clients, origin delay 1s"
echo "run dir: $RUN_DIR"
echo "sanity (the second request of a fresh key must be a hit):"
for t in "${TARGETS[@]}"; do
	u="http://${ADDR[$t]}/obj/1k/sanity"
	curl -s -o /dev/null "$u"
	printf '  %-8s %s\n' "$t" "$(curl -s -D - -o /dev/null "$u" | grep -iE '^(cache-status|x-cache-status|age|x-varnish):' | tr -d '\r' | tr '\n' ' ')"
done

# ---------------------------------------------------------------- measure
declare -A RPS=() CPU=() P50=() P99=() ORIG=() STORM_ORIG=() STORM_OK=() STORM_MS=()
run_hits() { # TARGET SIZE REP
	local t=$1 s=$2 rep=$3 out="$RUN_DIR/wrk-$1-$2-$3.txt" path="/obj/$2/hot" c0 c1 o0 o1 n rps cpu
	o0=$(origin_count "$path"); c0=$(cpu_ticks "${PG[$t]}")
	taskset -c 1 wrk -t2 -c"$CONNS" -d"$DURATION" --latency "http://${ADDR[$t]}$path" >"$out" 2>&1
	c1=$(cpu_ticks "${PG[$t]}"); o1=$(origin_count "$path")
	rps=$(awk '/^Requests\/sec:/{print $2}' "$out")
	n=$(awk '/requests in/{print $1}' "$out")
	cpu=$(awk -v t=$((c1 - c0)) -v n="${n:-0}" -v hz="$HZ" 'BEGIN{ if (n > 0) printf "%.2f", t * 1e6 / hz / n; else print 0 }')
	local k="$t $s"
	RPS[$k]+="${rps:-0} "; CPU[$k]+="$cpu "; ORIG[$k]+="$((o1 - o0)) "
	P50[$k]+="$(to_ms "$(awk '$1=="50%"{print $2}' "$out")") "
	P99[$k]+="$(to_ms "$(awk '$1=="99%"{print $2}' "$out")") "
	printf '  rep %d %-8s %-2s %9.0f hits/s  cpu %6s us/hit  origin +%d  %s\n' "$rep" "$t" "$s" "${rps:-0}" "$cpu" $((o1 - o0)) \
		"$(grep -E 'Non-2xx|Socket errors' "$out" | tr '\n' ' ')"
}
run_storm() { # TARGET REP
	local t=$1 rep=$2 path="/slow/1k/storm-$1-$2" out
	out=$(taskset -c 1 "$WORK/bin/cdnorigin" -storm "http://${ADDR[$t]}$path" -n "$STORM" -timeout 60s 2>&1)
	echo "$out" >"$RUN_DIR/storm-$t-$rep.txt"
	local got ok ms
	got=$(origin_count "$path")
	ok=$(awk '/^clients/{print $4}' <<<"$out"); ms=$(awk '/^clients/{print $8}' <<<"$out")
	STORM_ORIG[$t]+="$got "; STORM_OK[$t]+="${ok:-0} "; STORM_MS[$t]+="${ms:-0} "
	printf '  rep %d %-8s storm: %s -> origin got %s request(s)\n' "$rep" "$t" "$(head -1 <<<"$out")" "$got"
}

echo "--- warm-up (fills /obj/1k/hot and /obj/1m/hot, 2 s of wrk each)"
for t in "${TARGETS[@]}"; do
	for s in 1k 1m; do
		curl -s -o /dev/null "http://${ADDR[$t]}/obj/$s/hot"
		taskset -c 1 wrk -t2 -c"$CONNS" -d2s "http://${ADDR[$t]}/obj/$s/hot" >/dev/null 2>&1
	done
done
echo "--- measurements, interleaved"
for ((rep = 1; rep <= REPEATS; rep++)); do
	for t in "${TARGETS[@]}"; do
		run_hits "$t" 1k "$rep"; sleep 1
		run_hits "$t" 1m "$rep"; sleep 1
		run_storm "$t" "$rep"; sleep 1
	done
done

# shellcheck disable=SC2086
{
	echo
	echo "=== summary: median of $REPEATS; x nginx = ratio to nginx's median; CPU = the target's process group per hit"
	printf '| %-8s | %-4s | %9s | %7s | %8s | %7s | %7s | %7s | %6s |\n' target size "hits/s" "x nginx" "CPU µs/hit" "x nginx" "p50 ms" "p99 ms" origin
	echo "|---|---|---|---|---|---|---|---|---|"
	for s in 1k 1m; do
		br=$(median ${RPS["nginx $s"]:-0}); bc=$(median ${CPU["nginx $s"]:-0})
		for t in "${TARGETS[@]}"; do
			k="$t $s"; r=$(median ${RPS[$k]}); c=$(median ${CPU[$k]})
			awk -v t="$t" -v s="$s" -v r="$r" -v c="$c" -v br="$br" -v bc="$bc" -v a="$(median ${P50[$k]})" -v b="$(median ${P99[$k]})" -v o="$(printf '%s+' ${ORIG[$k]} | sed 's/+$//')" '
				function x(v, d) { return (d > 0) ? sprintf("%.2f", v / d) : "-" }
				BEGIN { printf "| %-8s | %-4s | %9.0f | %7s | %8.2f | %7s | %7.3f | %7.3f | %6s |\n", t, s, r, x(r, br), c, x(c, bc), a, b, o }'
		done
	done
	echo
	echo "storm: $STORM clients at once on a cold key (origin answer 1 s); origin requests per repeat, clients served 200, median wall ms"
	for t in "${TARGETS[@]}"; do
		printf '  %-8s origin requests: %s  ok: %s  wall ms (median): %s\n' "$t" "${STORM_ORIG[$t]}" "${STORM_OK[$t]}" "$(median ${STORM_MS[$t]})"
	done
	echo "(raw output in $RUN_DIR)"
}
