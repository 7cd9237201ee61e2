#!/bin/bash
# Run by the postgres image's entrypoint from /docker-entrypoint-initdb.d, once,
# when the data volume is first initialised (never again on later starts, so
# changing a password variable afterwards does not change the role).
#
# Creates:
#   role temporal  LOGIN CREATEDB  for the Temporal server and temporal-sql-tool,
#                                  which creates the temporal and
#                                  temporal_visibility databases itself
#   role allot     LOGIN           owner of database allot, allot's ledger
#                                  (the worker applies the ledger's migrations)
#
# The entrypoint may source this file rather than execute it, so it changes no
# shell options; a missing password variable stops the initialisation.

: "${TEMPORAL_DB_PASSWORD:?TEMPORAL_DB_PASSWORD must be set}"
: "${ALLOT_DB_PASSWORD:?ALLOT_DB_PASSWORD must be set}"

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
	-v temporal_password="$TEMPORAL_DB_PASSWORD" \
	-v allot_password="$ALLOT_DB_PASSWORD" <<-'SQL'
	CREATE ROLE temporal LOGIN CREATEDB PASSWORD :'temporal_password';
	CREATE ROLE allot LOGIN PASSWORD :'allot_password';
	CREATE DATABASE allot OWNER allot;
	REVOKE ALL ON DATABASE allot FROM PUBLIC;
SQL
