#!/usr/bin/env bash
# Checks that `go install github.com/spillwaylb/spillway/cmd/spillway@latest`
# works from a clean module cache, before a release is tagged.
#
# The module is not published when this runs, so HEAD is served as version
# v0.0.0-check from a local file proxy (a module zip made like the real one:
# git archive, minus nested modules); its dependencies come from the
# configured GOPROXY into an empty GOMODCACHE and are checked against go.sum
# and the checksum database, as for a user. The installed binary must report
# that version. Commit first: uncommitted changes are not part of HEAD.
#
#   scripts/check-go-install.sh
set -euo pipefail
cd "$(dirname "$0")/.."
mod=github.com/spillwaylb/spillway
ver=v0.0.0-check
if grep -qE '^\s*replace\b|^replace \(' go.mod; then
  echo "go.mod has replace directives: go install ...@version refuses them" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
dir="$tmp/proxy/$mod/@v"
mkdir -p "$dir"
git archive --format=zip --prefix="$mod@$ver/" -o "$dir/$ver.zip" HEAD
# A module zip leaves out directories that are modules of their own.
for m in $(git ls-files '*/go.mod'); do
  zip -q -d "$dir/$ver.zip" "$mod@$ver/$(dirname "$m")/*"
done
cp go.mod "$dir/$ver.mod"
echo "$ver" >"$dir/list"
printf '{"Version":"%s","Time":"%s"}\n' "$ver" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$dir/$ver.info"
upstream=$(go env GOPROXY)
(
  cd "$tmp"
  GOMODCACHE="$tmp/modcache" GOBIN="$tmp/bin" GOFLAGS=-modcacherw GONOSUMDB="$mod" \
    GOPROXY="file://$tmp/proxy,$upstream" go install "$mod/cmd/spillway@latest"
)
got=$("$tmp/bin/spillway" version)
echo "$got"
case "$got" in
"spillway $ver "*) echo "ok: go install $mod/cmd/spillway@latest from a clean module cache" ;;
*) echo "want version $ver" >&2; exit 1 ;;
esac
