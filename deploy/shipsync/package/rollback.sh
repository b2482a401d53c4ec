#!/usr/bin/env bash
# Switches relay shipsync back to the previous version (atomically; the one
# that was current becomes the previous, so running it again rolls forward),
# then restarts the service ($SHIPSYNC_RESTART_CMD, if set). Configuration and
# state are not touched.
# usage: rollback.sh [--prefix /opt/shipsync]
set -euo pipefail
prefix=/opt/shipsync
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="${2:?--prefix needs a directory}"; shift 2 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "rollback.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
current="$(readlink "$prefix/current" 2>/dev/null || true)"
previous="$(readlink "$prefix/previous" 2>/dev/null || true)"
if [ -z "$previous" ] || [ ! -d "$prefix/$previous" ]; then
  echo "rollback.sh: no previous version in $prefix to return to" >&2
  exit 2
fi
switch() {
  ln -sfn "$2" "$1.new.$$"
  mv -Tf "$1.new.$$" "$1"
}
switch "$prefix/current" "$previous"
[ -z "$current" ] || switch "$prefix/previous" "$current"
if [ -n "${SHIPSYNC_RESTART_CMD:-}" ]; then bash -c "$SHIPSYNC_RESTART_CMD"; fi
echo "rollback.sh: current is now ${previous#releases/}${current:+ (previous: ${current#releases/})}"
