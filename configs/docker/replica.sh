#!/bin/bash
# Entry point of a replica container: copy the primary once, then run as a
# streaming replica named after the container.
set -euo pipefail
until pg_isready -h pg-primary -U postgres -q; do sleep 1; done
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  mkdir -p "$PGDATA" && chown postgres "$PGDATA" && chmod 700 "$PGDATA"
  gosu postgres pg_basebackup -h pg-primary -U postgres -D "$PGDATA" -R -X stream -c fast
fi
exec gosu postgres postgres -c hot_standby=on -c cluster_name="$REPLICA_NAME"
