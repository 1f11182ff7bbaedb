#!/bin/sh
# Run by the postgres image after initdb on the primary: let the replicas
# stream WAL (the image's trust rule covers databases, not replication),
# and create the role pgdns probes as (the replicas copy it).
echo "host replication all all trust" >> "$PGDATA/pg_hba.conf"
psql -v ON_ERROR_STOP=1 --username postgres --dbname postgres \
	-c 'CREATE ROLE pgdns LOGIN' -c 'GRANT pg_monitor TO pgdns'
