#!/usr/bin/env bash
# The soak test, full version (docs/reliability.md, "Soak"): builds the
# spillway binary from this checkout, runs it as `spillway serve` in front
# of the lab's backends for DURATION of chaos (default 10m) plus about 30 s
# of set-up, warm-up and settling, and prints the report.
#
#   scripts/soak.sh            # 10 minutes
#   scripts/soak.sh 2m         # any Go duration
#
# Everything goes to OUT (default: a new /tmp/spillway-soak.XXXXXX):
# spillway (the binary), progress.log (the chaos timeline), report.txt (the
# table, then the JSON), run/ (configs, certificates, the proxy's log).
# TIMEOUT bounds the whole go test (default 90m). The exit status is go
# test's: 0 when every pass criterion held.
set -euo pipefail
dur=${1:-10m}
here=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$(mktemp -d /tmp/spillway-soak.XXXXXX)}
mkdir -p "$out/run"
cd "$here"
echo "soak: building spillway into $out" >&2
go build -o "$out/spillway" ./cmd/spillway
go test -c -o "$out/soak.test" ./internal/soak
echo "soak: $dur of chaos; progress in $out/progress.log" >&2
status=0
(cd internal/soak && SPILLWAY_SOAK=$dur SPILLWAY_SOAK_BIN=$out/spillway \
  SPILLWAY_SOAK_REPORT=$out/report.txt SPILLWAY_SOAK_DIR=$out/run \
  "$out/soak.test" -test.run '^TestSoak$' -test.v -test.timeout "${TIMEOUT:-90m}") \
  >"$out/progress.log" 2>&1 || status=$?
if [ -f "$out/report.txt" ]; then
  sed '/^{$/,$d' "$out/report.txt"
  echo "soak: JSON report in $out/report.txt" >&2
else
  tail -n 40 "$out/progress.log"
fi
echo "soak: exit status $status" >&2
exit "$status"
