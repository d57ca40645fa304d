#!/usr/bin/env bash
# Runs every fuzz target in the module for a bounded time each (FUZZTIME,
# default 5s): CI's smoke run of the fuzzers. The seed corpora already run
# as regression cases under plain `go test`; this adds a few seconds of
# mutation per target. A failure writes the input under the package's
# testdata/fuzz/<Target>/ and fails the run. Arguments: package patterns
# (default ./...).
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-5s}
for pkg in $(go list "${@:-./...}"); do
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "fuzz: $pkg $target for $fuzztime"
    go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -parallel 2
  done
done
