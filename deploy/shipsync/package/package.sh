#!/usr/bin/env bash
# Lays out the ship's offline package of relay shipsync and its tarball:
#
#   shipsync-client-<version>-<os>-<arch>/
#     VERSION            the version
#     bin/relay          the statically linked binary (every role; the migrations are embedded)
#     config/            templates: client.env.example, rules.example.json (never installed over an existing config)
#     images/            container image archives, when IMAGES_DIR names a directory of *.tar / *.tar.zst
#     install.sh         verify checksums, install beside the current version, switch atomically, health-check, roll back on failure
#     rollback.sh        switch back to the previous version
#     SHA256SUMS         sha256sum of every other file
#   shipsync-client-<version>-<os>-<arch>.tar.gz
#
# usage: package.sh VERSION [OUT_DIR]     (OUT_DIR default: dist)
# env:   BINARY=path   use this binary instead of building ./cmd/relay
#        GOOS, GOARCH  the target (default: this machine's)
#        IMAGES_DIR    image archives to include
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
version="${1:?usage: package.sh VERSION [OUT_DIR]}"
if ! [[ "$version" =~ ^[0-9A-Za-z][0-9A-Za-z._+-]{0,63}$ ]]; then
  echo "package.sh: version must be letters, digits, . _ + - (got '$version')" >&2
  exit 2
fi
out="${2:-dist}"
goos="${GOOS:-$(go env GOOS 2>/dev/null || uname -s | tr A-Z a-z)}"
goarch="${GOARCH:-$(go env GOARCH 2>/dev/null || uname -m)}"
name="shipsync-client-$version-$goos-$goarch"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
dir="$out/$name"
if [ -e "$dir" ] || [ -e "$dir.tar.gz" ]; then
  echo "package.sh: $dir exists; a released package is never rebuilt in place" >&2
  exit 2
fi
stage="$(mktemp -d "$out/.stage.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$name/bin" "$stage/$name/config"
if [ -n "${BINARY:-}" ]; then
  cp "$BINARY" "$stage/$name/bin/relay"
else
  (cd "$root" && CGO_ENABLED=0 GOOS="$goos" GOARCH="$goarch" \
    go build -trimpath -tags timetzdata -ldflags="-s -w" -o "$stage/$name/bin/relay" ./cmd/relay)
fi
chmod 0755 "$stage/$name/bin/relay"
printf '%s\n' "$version" > "$stage/$name/VERSION"
cp "$here"/config/* "$stage/$name/config/"
cp "$here/install.sh" "$here/rollback.sh" "$stage/$name/"
chmod 0755 "$stage/$name/install.sh" "$stage/$name/rollback.sh"
if [ -n "${IMAGES_DIR:-}" ]; then
  mkdir -p "$stage/$name/images"
  cp "$IMAGES_DIR"/*.tar* "$stage/$name/images/"
fi
(cd "$stage/$name" && find . -type f ! -name SHA256SUMS -printf '%P\n' | LC_ALL=C sort | xargs -d '\n' sha256sum > SHA256SUMS)
tar -C "$stage" -czf "$stage/$name.tar.gz" "$name"
mv "$stage/$name" "$dir"
mv "$stage/$name.tar.gz" "$dir.tar.gz"
echo "package.sh: $dir.tar.gz"
