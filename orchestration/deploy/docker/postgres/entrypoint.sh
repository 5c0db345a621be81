#!/usr/bin/env bash
# First start: create the cluster, the role and the database from POSTGRES_USER,
# POSTGRES_PASSWORD, POSTGRES_DB; every start: serve on all interfaces of the
# container (reachable only on the deployment's Docker network and the loopback
# port the deployment publishes), password authentication.
set -euo pipefail
: "${POSTGRES_USER:?}" "${POSTGRES_PASSWORD:?}" "${POSTGRES_DB:?}"
bin=/usr/lib/postgresql/15/bin
mkdir -p "$PGDATA" /run/postgresql
chown -R postgres:postgres "$PGDATA" /run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp); printf '%s' "$POSTGRES_PASSWORD" > "$pwfile"; chown postgres "$pwfile"
  su postgres -c "$bin/initdb -D '$PGDATA' -U '$POSTGRES_USER' --pwfile='$pwfile' --auth=scram-sha-256 >/dev/null"
  rm -f "$pwfile"
  echo "host all all 0.0.0.0/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
  su postgres -c "$bin/pg_ctl -D '$PGDATA' -o \"-c listen_addresses=''\" -w start"
  su postgres -c "PGPASSWORD='$POSTGRES_PASSWORD' psql -q -h /run/postgresql -U '$POSTGRES_USER' -d postgres -c 'CREATE DATABASE \"$POSTGRES_DB\"'"
  su postgres -c "$bin/pg_ctl -D '$PGDATA' -m fast -w stop"
fi
exec su postgres -c "exec $bin/postgres -D '$PGDATA' -c listen_addresses='*' -c max_connections=200"
