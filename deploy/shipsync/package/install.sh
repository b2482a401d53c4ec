#!/usr/bin/env bash
# Installs this offline package of relay shipsync:
#   1. verifies every file against SHA256SUMS (and that no file is unlisted) — nothing changes otherwise;
#   2. copies it to PREFIX/releases/<version> beside the current one;
#   3. installs config templates into PREFIX/etc only where no file exists (an operator's config is never touched;
#      nor is the state directory, PREFIX/data or /var/lib/sync);
#   4. switches PREFIX/current to it atomically (a symlink renamed over the old one) and PREFIX/previous to what
#      was current;
#   5. restarts the service ($SHIPSYNC_RESTART_CMD, if set) and runs the health check ($SHIPSYNC_HEALTH_CMD,
#      default: the new binary runs) within --health-timeout; on failure switches back to the previous version and
#      exits 3;
#   6. keeps only the current and the previous release.
# usage: install.sh [--prefix /opt/shipsync] [--health-timeout 60]
set -euo pipefail
prefix=/opt/shipsync
timeout_s=60
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="${2:?--prefix needs a directory}"; shift 2 ;;
    --health-timeout) timeout_s="${2:?--health-timeout needs seconds}"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
pkg="$(cd "$(dirname "$0")" && pwd)"
cd "$pkg"
if ! sha256sum --quiet --strict -c SHA256SUMS; then
  echo "install.sh: checksum mismatch: the package is damaged or altered; nothing was changed" >&2
  exit 2
fi
unlisted="$(find . -type f ! -name SHA256SUMS -printf '%P\n' | LC_ALL=C sort | comm -23 - <(cut -c67- SHA256SUMS | LC_ALL=C sort))"
if [ -n "$unlisted" ]; then
  echo "install.sh: files not in SHA256SUMS: $unlisted; nothing was changed" >&2
  exit 2
fi
version="$(cat VERSION)"
if ! [[ "$version" =~ ^[0-9A-Za-z][0-9A-Za-z._+-]{0,63}$ ]]; then
  echo "install.sh: bad VERSION" >&2
  exit 2
fi

mkdir -p "$prefix/releases" "$prefix/etc" "$prefix/data"
prefix="$(cd "$prefix" && pwd)"
switch() { # switch LINK TARGET: point LINK at TARGET atomically
  ln -sfn "$2" "$1.new.$$"
  mv -Tf "$1.new.$$" "$1"
}
current="$(readlink "$prefix/current" 2>/dev/null || true)"
if [ "$current" = "releases/$version" ]; then
  echo "install.sh: $version is already the current version"
  exit 0
fi
if [ ! -d "$prefix/releases/$version" ]; then
  tmp="$(mktemp -d "$prefix/releases/.install.XXXXXX")"
  cp -a "$pkg/." "$tmp/"
  chmod 0755 "$tmp"
  mv -T "$tmp" "$prefix/releases/$version"
fi
for f in "$pkg"/config/*; do
  [ -e "$prefix/etc/$(basename "$f")" ] || cp "$f" "$prefix/etc/"
done

old_previous="$(readlink "$prefix/previous" 2>/dev/null || true)"
switch "$prefix/current" "releases/$version"
if [ -n "$current" ]; then
  switch "$prefix/previous" "$current"
fi
echo "install.sh: current is now $version${current:+ (previous: ${current#releases/})}"

if [ -d "$prefix/current/images" ] && command -v docker >/dev/null 2>&1; then
  for img in "$prefix/current/images"/*.tar*; do
    case "$img" in
      *.zst) zstd -dc "$img" | docker load ;;
      *) docker load -i "$img" ;;
    esac
  done
fi
restart() { if [ -n "${SHIPSYNC_RESTART_CMD:-}" ]; then bash -c "$SHIPSYNC_RESTART_CMD"; fi; }
healthy() {
  local cmd="${SHIPSYNC_HEALTH_CMD:-\"$prefix/current/bin/relay\" help >/dev/null}"
  local deadline=$((SECONDS + timeout_s))
  while :; do
    if timeout "$timeout_s" bash -c "$cmd"; then return 0; fi
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 2
  done
}
restart || true
if ! healthy; then
  if [ -z "$current" ]; then
    echo "install.sh: $version failed its health check and there is no previous version to return to" >&2
    exit 3
  fi
  echo "install.sh: $version failed its health check within ${timeout_s}s; switching back to ${current#releases/}" >&2
  switch "$prefix/current" "$current"
  if [ -n "$old_previous" ]; then switch "$prefix/previous" "$old_previous"; else rm -f "$prefix/previous"; fi
  restart || true
  exit 3
fi
# Keep only current and previous.
keep_prev="$(readlink "$prefix/previous" 2>/dev/null || true)"
for d in "$prefix"/releases/*/; do
  r="releases/$(basename "$d")"
  [ "$r" = "releases/$version" ] || [ "$r" = "$keep_prev" ] || rm -rf "$d"
done
echo "install.sh: $version installed and healthy"
