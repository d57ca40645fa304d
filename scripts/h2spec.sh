#!/usr/bin/env bash
# HTTP/2 conformance (issue 17): builds h2spec (github.com/summerwind/h2spec,
# pinned below) from the Go module proxy in a temporary module, caches the
# binary outside the repo, and runs internal/serve TestH2spec with it. The
# test serves an h2c and a TLS frontend on both HTTP/1.1 server loops and
# fails on any h2spec failure not listed, with its reason, in
# internal/serve/testdata/h2spec-exceptions.txt (docs/reliability.md).
#
#   scripts/h2spec.sh            build if needed, then run the test
#   scripts/h2spec.sh --install  build if needed, print the binary's path
#
# If the build fails (no module proxy), it prints a note and exits 0 with
# nothing run, unless SPILLWAY_REQUIRE_H2SPEC is set (CI), then 1.
# SPILLWAY_H2SPEC_CACHE overrides the cache directory.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

# h2spec has no go.mod; its imports are pinned here so that the build is
# the same wherever it runs (x/net as in Spillway's go.mod).
h2spec_version=v2.2.1+incompatible
deps=(
  github.com/spf13/cobra@v1.10.2
  github.com/fatih/color@v1.19.0
  golang.org/x/net@v0.62.0
)
cache=${SPILLWAY_H2SPEC_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/spillway/h2spec-${h2spec_version%%+*}}
bin=$cache/h2spec

build() {
  local tmp rc=0
  tmp=$(mktemp -d)
  if (
    cd "$tmp" &&
      export GOFLAGS=-mod=mod GOWORK=off &&
      go mod init h2spec-build &&
      go get "github.com/summerwind/h2spec@$h2spec_version" "${deps[@]}" &&
      go build -o "$tmp/h2spec" github.com/summerwind/h2spec/cmd/h2spec
  ) >"$tmp/log" 2>&1; then
    mkdir -p "$cache" && mv "$tmp/h2spec" "$bin" || rc=1
  else
    tail -20 "$tmp/log" >&2
    rc=1
  fi
  rm -rf "$tmp"
  return "$rc"
}

if [ ! -x "$bin" ] && ! build; then
  if [ -n "${SPILLWAY_REQUIRE_H2SPEC:-}" ]; then
    echo "note: could not build h2spec $h2spec_version from the Go module proxy, and SPILLWAY_REQUIRE_H2SPEC is set: failing" >&2
    exit 1
  fi
  echo "note: could not build h2spec $h2spec_version from the Go module proxy; TestH2spec will skip" >&2
  exit 0
fi
if [ "${1:-}" = "--install" ]; then
  echo "$bin"
  exit 0
fi
SPILLWAY_H2SPEC=$bin go test -count=1 -v -run '^TestH2spec$' ./internal/serve/ \
  | grep -E 'h2spec|^(---|ok|FAIL|PASS)'
exit "${PIPESTATUS[0]}"
