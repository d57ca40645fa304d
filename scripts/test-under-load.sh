#!/usr/bin/env bash
# Runs tests while busy loops hold the CPUs: the check that tests whose
# pass depends on timing wait on conditions with generous bounds, so the
# README's `go test ./...` stays green on a loaded machine. LOAD busy
# loops (default 2, one per core here) run for at most 20 minutes each and
# are stopped, by PID, when the script exits however it exits.
# Arguments: package patterns (default: the packages whose tests wait on
# time: proxy, h1, probe, fleet, serve, cli, gslb).
set -euo pipefail
cd "$(dirname "$0")/.."
load=${LOAD:-2}
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap stop EXIT
for _ in $(seq "$load"); do
  timeout 1200 sh -c 'while :; do :; done' &
  pids+=("$!")
done
echo "test-under-load: $load busy loops (pids ${pids[*]})"
pkgs=("$@")
if [ ${#pkgs[@]} -eq 0 ]; then
  pkgs=(./internal/proxy/... ./internal/h1/... ./internal/probe/... ./internal/fleet/... ./internal/serve/... ./internal/cli/... ./internal/gslb/...)
fi
go test -count=1 "${pkgs[@]}"
