#!/bin/sh
# Run by the postgres image after initdb on the primary: let the replicas
# stream WAL (the image's trust rule covers databases, not replication).
echo "host replication all all trust" >> "$PGDATA/pg_hba.conf"
