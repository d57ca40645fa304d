#!/usr/bin/env bash
# bench/waf.sh - the cost of a WAF in the proxy: Spillway with a Cloud Armor
# policy calling the preconfigured WAF (sqli-v33-stable and xss-v33-stable at
# sensitivity 1, on the OWASP CRS through Coraza) beside nginx + ModSecurity v3
# with the OWASP CRS's SQL injection and XSS files at paranoia level 1, each
# also without its WAF, for a small GET (browser-like headers and a cookie)
# and an 8 KiB form POST (64 fields). Reports req/s and the proxy's CPU time
# per request, medians of interleaved repeats, and the WAF's cost (CPU with it
# minus CPU without it).
#
# Usage: bench/waf.sh [--duration 10s] [--repeats 3] [--conns 16] [--only LIST]
#   LIST: comma list of nginx, nginx-modsec, spillway, spillway-waf.
# Needs: nginx, libnginx-mod-http-modsecurity, modsecurity-crs, wrk, curl, and
# bin/spillway built from this repo (go build -o bin/spillway ./cmd/spillway).
# Ports (127.0.0.1): backends 18781-18783, nginx 18780, nginx+ModSecurity
# 18790, spillway 18784, spillway+WAF 18794. Loopback only; every process is
# stopped by its process group at the end.
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
WORK=${BENCH_WORK:-${XDG_CACHE_HOME:-$HOME/.cache}/spillway-bench}
SPILLWAY=${SPILLWAY:-$REPO/bin/spillway}
MODSEC_MODULE=/usr/lib/nginx/modules/ngx_http_modsecurity_module.so
DURATION=10s
REPEATS=3
CONNS=16
ONLY=""
die() { echo "waf.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case "$1" in
	--duration) DURATION=$2; shift 2 ;;
	--repeats) REPEATS=$2; shift 2 ;;
	--conns) CONNS=$2; shift 2 ;;
	--only) ONLY=$2; shift 2 ;;
	-h|--help) sed -n '2,18p' "$0"; exit 0 ;;
	*) die "unknown argument: $1 (see --help)" ;;
	esac
done
for t in nginx wrk curl taskset; do command -v $t >/dev/null || die "$t not installed"; done
[ -f "$MODSEC_MODULE" ] || die "no $MODSEC_MODULE (apt-get install -y libnginx-mod-http-modsecurity modsecurity-crs)"
[ -d /usr/share/modsecurity-crs/rules ] || die "no OWASP CRS (apt-get install -y modsecurity-crs)"
[ -x "$SPILLWAY" ] || die "no $SPILLWAY (go build -o bin/spillway ./cmd/spillway)"

RUN_DIR=$WORK/run/waf-$(date +%Y%m%d-%H%M%S)-$$
mkdir -p "$RUN_DIR/nginx/tmp" "$WORK/bin"
export BACKENDS=127.0.0.1:18781,127.0.0.1:18782,127.0.0.1:18783

PIDS=()
start() { # NAME CMD...: its own session, so its PID is its process group
	local name=$1; shift
	setsid "$@" >"$RUN_DIR/$name.log" 2>&1 </dev/null &
	PIDS+=($!)
}
stop_all() {
	local pid i
	for pid in "${PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
	for ((i = 0; i < 30; i++)); do
		local alive=0
		for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
		[ $alive = 0 ] && break
		sleep 0.1
	done
	for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && kill -KILL -- "-$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
	PIDS=()
}
trap stop_all EXIT
trap 'exit 130' INT TERM
want() { [ -z "$ONLY" ] || [[ ",$ONLY," == *",$1,"* ]]; }
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@"; }
wait_ready() {
	local i
	for ((i = 0; i < 100; i++)); do [ "$(code "http://$1/")" = 200 ] && return 0; sleep 0.1; done
	echo "!! $2 at $1 not ready:"; tail -20 "$RUN_DIR/$2.log"; return 1
}

for p in 18780 18781 18782 18783 18784 18790 18794; do
	(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && die "port $p in use"
done
if [ ! -x "$WORK/bin/backend" ] || [ "$HERE/backend/main.go" -nt "$WORK/bin/backend" ]; then
	(cd "$HERE/backend" && GOTOOLCHAIN=local go build -trimpath -o "$WORK/bin/backend" .) || die "backend build failed"
fi
for i in 1 2 3; do start backend$i env GOMAXPROCS=1 "$WORK/bin/backend" -addr 127.0.0.1:1878$i -zone z$i; done
for i in 1 2 3; do wait_ready 127.0.0.1:1878$i backend$i || exit 1; done

declare -A ADDR=() PG=()
TARGETS=()
if want nginx || want nginx-modsec; then
	{ echo "load_module $MODSEC_MODULE;"; cat "$HERE/conf/nginx-modsecurity.conf"; } >"$RUN_DIR/nginx/nginx.conf"
	printf 'modsecurity on;\nmodsecurity_rules_file %s;\n' "$HERE/conf/modsecurity.conf" >"$RUN_DIR/nginx/modsecurity-rules.conf"
	start nginx nginx -p "$RUN_DIR/nginx/" -c "$RUN_DIR/nginx/nginx.conf" -e "$RUN_DIR/nginx/error.log" -g 'daemon off;'
	want nginx && { TARGETS+=(nginx); ADDR[nginx]=127.0.0.1:18780; PG[nginx]=$!; }
	want nginx-modsec && { TARGETS+=(nginx-modsec); ADDR[nginx-modsec]=127.0.0.1:18790; PG[nginx-modsec]=$!; }
fi
if want spillway; then
	start spillway env SPILLWAY="$SPILLWAY" "$REPO/scripts/bench-serve.sh" 127.0.0.1:18784
	TARGETS+=(spillway); ADDR[spillway]=127.0.0.1:18784; PG[spillway]=$!
fi
if want spillway-waf; then
	start spillway-waf env SPILLWAY="$SPILLWAY" WAF=1 "$REPO/scripts/bench-serve.sh" 127.0.0.1:18794
	TARGETS+=(spillway-waf); ADDR[spillway-waf]=127.0.0.1:18794; PG[spillway-waf]=$!
fi
for t in "${TARGETS[@]}"; do wait_ready "${ADDR[$t]}" "$t" || exit 1; done

# The workloads, as wrk scripts: the same requests to every target.
HDRS='wrk.headers["User-Agent"] = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
wrk.headers["Accept"] = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
wrk.headers["Accept-Language"] = "en-US,en;q=0.5"
wrk.headers["Cookie"] = "session=3f9a1c7e5b2d4a6f8e0c1b3d5f7a9c2e; theme=dark"'
printf '%s\n' "$HDRS" >"$RUN_DIR/get.lua"
BODY=$(awk 'BEGIN { for (i = 0; i < 64; i++) { f = sprintf("field%02d=", i); v = ""; while (length(f v) < 127) v = v sprintf("value%03dx", length(v)); printf "%s%s%s", (i ? "&" : ""), f, substr(v, 1, 127 - length(f)) } }')
printf '%s\nwrk.method = "POST"\nwrk.headers["Content-Type"] = "application/x-www-form-urlencoded"\nwrk.body = "%s"\n' "$HDRS" "$BODY" >"$RUN_DIR/post.lua"
echo "=== waf.sh $(date -u +%Y-%m-%dT%H:%M:%SZ): $(nproc) CPUs, $(nginx -v 2>&1 | sed 's/.*: //'), libmodsecurity $(dpkg-query -W -f '${Version}' libmodsecurity3 2>/dev/null), CRS $(dpkg-query -W -f '${Version}' modsecurity-crs 2>/dev/null), $("$SPILLWAY" version 2>/dev/null | head -1)"
echo "wrk -t2 -c$CONNS -d$DURATION on CPU 1, servers float; POST body ${#BODY} bytes; repeats $REPEATS interleaved; run dir $RUN_DIR"
echo "sanity: ordinary GET and POST, then a SQL injection and an XSS in the query:"
for t in "${TARGETS[@]}"; do
	printf '  %-13s GET %s  POST %s  sqli %s  xss %s\n' "$t" "$(code "http://${ADDR[$t]}/")" \
		"$(code -X POST -H 'Content-Type: application/x-www-form-urlencoded' --data "$BODY" "http://${ADDR[$t]}/")" \
		"$(code "http://${ADDR[$t]}/?id=1%27%20OR%20%271%27%3D%271")" "$(code "http://${ADDR[$t]}/?q=%3Cscript%3Ealert(1)%3C%2Fscript%3E")"
done

HZ=$(getconf CLK_TCK)
cpu_ticks() { cat /proc/[0-9]*/stat 2>/dev/null | awk -v g="$1" '{ sub(/^.*\) /, ""); split($0, f, " "); if (f[3] == g) s += f[12] + f[13] } END { print s + 0 }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{ if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2 }'; }
declare -A RPS=() CPU=() BAD=()
for ((rep = 1; rep <= REPEATS; rep++)); do
	for w in get post; do
		for t in "${TARGETS[@]}"; do
			out="$RUN_DIR/wrk-$w-$t-$rep.txt"
			c0=$(cpu_ticks "${PG[$t]}")
			taskset -c 1 wrk -t2 -c"$CONNS" -d"$DURATION" --timeout 10s -s "$RUN_DIR/$w.lua" "http://${ADDR[$t]}/" >"$out" 2>&1
			c1=$(cpu_ticks "${PG[$t]}")
			rps=$(awk '/^Requests\/sec:/{print $2}' "$out")
			n=$(awk '/requests in/{print $1}' "$out")
			us=$(awk -v t=$((c1 - c0)) -v n="${n:-0}" -v hz="$HZ" 'BEGIN{ printf "%.1f", (n > 0) ? t * 1e6 / hz / n : 0 }')
			bad=$(awk -F: '/Non-2xx|Socket errors/{gsub(/^ +/, "", $2); printf "%s %s; ", $1, $2}' "$out")
			RPS[$w,$t]+="${rps:-0} "; CPU[$w,$t]+="$us "; BAD[$w,$t]+="$bad"
			printf '  rep %d %-4s %-13s %9.0f req/s %9s us CPU/req %s\n' "$rep" "$w" "$t" "${rps:-0}" "$us" "$bad"
			sleep 1
		done
	done
done

echo
echo "=== medians of $REPEATS: req/s and proxy CPU per request (user+sys of its process group; nginx's counts both listeners' workers)"
printf '%-5s %-13s %9s %12s %16s\n' load target "req/s" "CPU us/req" "WAF's CPU us/req"
for w in get post; do
	for t in "${TARGETS[@]}"; do
		# shellcheck disable=SC2086
		r=$(median ${RPS[$w,$t]}); c=$(median ${CPU[$w,$t]})
		base=""
		case $t in nginx-modsec) base=nginx ;; spillway-waf) base=spillway ;; esac
		extra="-"
		# shellcheck disable=SC2086
		[ -n "$base" ] && [ -n "${CPU[$w,$base]:-}" ] && extra=$(awk -v a="$c" -v b="$(median ${CPU[$w,$base]})" 'BEGIN{ printf "%.1f (x%.1f)", a - b, a / b }')
		printf '%-5s %-13s %9.0f %12s %16s\n' "$w" "$t" "$r" "$c" "$extra"
		[ -n "${BAD[$w,$t]}" ] && echo "      errors: ${BAD[$w,$t]}"
	done
done
# shellcheck disable=SC2086
if [ -n "${CPU[get,spillway-waf]:-}" ] && [ -n "${CPU[get,nginx-modsec]:-}" ]; then
	for w in get post; do
		awk -v w=$w -v s="$(median ${CPU[$w,spillway-waf]})" -v n="$(median ${CPU[$w,nginx-modsec]})" -v sr="$(median ${RPS[$w,spillway-waf]})" -v nr="$(median ${RPS[$w,nginx-modsec]})" \
			'BEGIN{ printf "%s: spillway-waf / nginx-modsec: CPU per request x%.2f, req/s x%.2f\n", w, s / n, sr / nr }'
	done
fi
echo "note: load generator, proxies and backends share the machine's CPUs; compare ratios within one run."
