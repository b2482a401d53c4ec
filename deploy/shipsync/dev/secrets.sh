#!/usr/bin/env bash
# Makes the development secrets of compose.yaml in ../secrets (git-ignored):
# random database passwords and the connection strings built from them.
# Never overwrites a file that exists. Production secrets come from the
# deployment's own secret store, never from this script.
set -euo pipefail
cd "$(dirname "$0")/../secrets"
# The directory keeps other users out; the files must be readable by the
# containers' non-root user (compose bind-mounts them as they are).
chmod 0700 .
umask 022
rand() { od -An -N16 -tx1 /dev/urandom | tr -d ' \n'; }
put() { # put FILE VALUE: write VALUE to FILE unless FILE exists
  [ -e "$1" ] || printf '%s\n' "$2" > "$1"
}
put pg_password "$(rand)"
put ship_db_root_password "$(rand)"
put ship_db_password "$(rand)"
put shore_db_root_password "$(rand)"
put shore_db_password "$(rand)"
put shore_database_url "postgres://shipsync:$(cat pg_password)@postgres:5432/shipsync?sslmode=disable"
put shore_target_dsn "shipsync:$(cat shore_db_password)@tcp(shore-db:3306)/ops"
put ship_db_dsn "shipsync:$(cat ship_db_password)@tcp(ship-db:3306)/ops"
echo "development secrets in $(pwd)"
