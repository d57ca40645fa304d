#!/usr/bin/env bash
# Runs every fuzz target in the module for a bounded time each (FUZZTIME,
# default 5s): CI's smoke run of the fuzzers. The seed corpora already run
# as regression cases under plain `go test`; this adds a few seconds of
# mutation per target. A failure writes the input under the package's
# testdata/fuzz/<Target>/ and fails the run. Arguments: package patterns
# (default ./...).
#
# Two properties of Go's fuzzer shape this script:
#   - A worker that finds a new interesting input minimizes it before it
#     reports back, for up to -fuzzminimizetime (default 60 s). On a large
#     seed (a 4 KB config) that one minimization used the whole 5 s budget
#     and the target ran 7 inputs. The budget is bounded here.
#   - With a duration -fuzztime, Go 1.26's coordinator can report its own
#     deadline as a failure ("context deadline exceeded", go.dev/issue/75804,
#     fixed in Go 1.27) with no input at fault. A run that fails that way,
#     with no failing input written, is run once more; anything else fails.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-5s}
minimize=${FUZZMINIMIZETIME:-1s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

fuzz_once() {
  go test "$1" -run '^$' -fuzz "^${2}\$" -fuzztime "$fuzztime" \
    -fuzzminimizetime "$minimize" -parallel 2 2>&1 | tee "$log"
  return "${PIPESTATUS[0]}"
}

# deadline_flake reports whether the last run failed only on the fuzzing
# coordinator's own deadline.
deadline_flake() {
  grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"
}

for pkg in $(go list "${@:-./...}"); do
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "fuzz: $pkg $target for $fuzztime"
    if fuzz_once "$pkg" "$target"; then continue; fi
    if deadline_flake; then
      echo "fuzz: $target stopped on the coordinator's deadline with no failing input (go.dev/issue/75804); running it again"
      fuzz_once "$pkg" "$target" && continue
    fi
    exit 1
  done
done
