# bench/lib.sh - process handling shared by the bench scripts that source
# it (conns.sh, tls.sh). The sourcing script sets RUN_DIR (where each
# process's log goes) and defines die.

PIDS=()
start() { # NAME CMD...: in its own session (PID = PGID), so that the group can be stopped
	local name=$1; shift
	setsid "$@" >"$RUN_DIR/$name.log" 2>&1 </dev/null &
	PIDS+=($!)
}
stop() { # PID: TERM the group, KILL after 3 s
	local pid=$1 i
	kill -TERM -- "-$pid" 2>/dev/null
	for ((i = 0; i < 30; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -KILL -- "-$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
}
cleanup() { local p; for p in "${PIDS[@]}"; do stop "$p"; done; }
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_ready() { # URL: until it answers 200 (10 s at most)
	local i
	for ((i = 0; i < 100; i++)); do
		[ "$(curl -sk -o /dev/null -w '%{http_code}' --max-time 1 "$1")" = 200 ] && return 0
		sleep 0.1
	done
	die "$1 not answering"
}
cpu_ticks() { # PGID: user+system clock ticks of the group's processes
	cat /proc/[0-9]*/stat 2>/dev/null | awk -v g="$1" '{ sub(/^.*\) /, ""); split($0, f, " "); if (f[3] == g) s += f[12] + f[13] } END { print s + 0 }'
}
