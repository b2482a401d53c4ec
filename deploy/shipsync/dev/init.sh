#!/bin/sh
# The development set-up job of compose.yaml, safe to run again: the PKI
# (CA, the shore's certificate, node ship-1's), the shore schema, node ship-1
# registered and allowed rule voyage@1, the rule registered, and the trigger
# capture installed in both business databases.
set -eu
PKI=/pki/dev
[ -f "$PKI/ca.crt" ] || relay shipsync pki init --dir "$PKI"
[ -f "$PKI/server.crt" ] || relay shipsync pki server --dir "$PKI" --hosts shore,localhost,127.0.0.1
[ -f "$PKI/node-ship-1.crt" ] || relay shipsync pki node --dir "$PKI" --node ship-1
# DATABASE_URL_FILE names the shore's PostgreSQL secret.
if ! relay shipsync node list --migrate | grep -q 'ship-1'; then
  relay shipsync node add --actor dev-init --reason "development compose" --cert "$PKI/node-ship-1.crt"
fi
relay shipsync node allow-rule --actor dev-init --node ship-1 --rule voyage --rule-version 1
relay shipsync rule list | grep -q 'voyage' || relay shipsync rule add --actor dev-init --reason "development compose" \
  --rule voyage --rule-version 1 --source-table voyage --target-table voyage --key id \
  --columns id,vessel,note,updated_at --conflict-policy LAST_WRITER_WINS --lww-column updated_at
CAPTURE_DB_FILE=/run/secrets/ship_db_dsn relay shipsync capture install --node-id ship-1 --tables voyage
CAPTURE_DB_FILE=/run/secrets/shore_target_dsn relay shipsync capture install --node-id shore --tables voyage
echo "dev-init: done"
