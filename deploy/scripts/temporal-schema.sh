#!/bin/sh
# Creates the Temporal persistence and visibility databases on PostgreSQL and
# brings both schemas to the version this admin-tools image ships, with
# temporal-sql-tool (plugin postgres12). Run by the temporal-schema service of
# docker-compose.temporal.yml, before the server starts.
#
# Idempotent: an existing database is kept, `setup-schema -v 0.0` does nothing
# on a database that already has a schema version, and `update-schema` applies
# only the migrations that are missing. Rerun it after upgrading the images.
#
# POSIX sh on purpose: the admin-tools image need not have bash.
#
# Environment (set in the compose file):
#   POSTGRES_SEEDS, DB_PORT   PostgreSQL host and port
#   POSTGRES_USER             a role allowed to create databases
#   SQL_PASSWORD              its password (read by temporal-sql-tool itself)
#   DBNAME, VISIBILITY_DBNAME the two databases
#   TEMPORAL_SCHEMA_DIR       schema root (default: the image's postgresql/v12)
#   SCHEMA_ATTEMPTS           tries before giving up (default 30, 2 s apart)
set -eu

host="${POSTGRES_SEEDS:?POSTGRES_SEEDS must name the PostgreSQL host}"
port="${DB_PORT:-5432}"
user="${POSTGRES_USER:?POSTGRES_USER must be set}"
: "${SQL_PASSWORD:?SQL_PASSWORD must be set}"
db="${DBNAME:-temporal}"
visibility_db="${VISIBILITY_DBNAME:-temporal_visibility}"
schema_root="${TEMPORAL_SCHEMA_DIR:-/etc/temporal/schema/postgresql/v12}"
attempts="${SCHEMA_ATTEMPTS:-30}"

log() {
	echo "temporal-schema: $*"
}

sql_tool() {
	temporal-sql-tool --plugin postgres12 --endpoint "$host" --port "$port" --user "$user" "$@"
}

# setup_database NAME SCHEMA_DIR
setup_database() {
	if ! sql_tool --database "$1" create-database; then
		# Older tools fail on an existing database; setup-schema below fails
		# too if the database is really missing, so nothing is hidden here.
		log "create-database $1 failed (it may already exist); continuing"
	fi
	sql_tool --database "$1" setup-schema -v 0.0 &&
		sql_tool --database "$1" update-schema -d "$2"
}

# with_retries WHAT COMMAND...
with_retries() {
	what="$1"
	shift
	attempt=1
	until "$@"; do
		if [ "$attempt" -ge "$attempts" ]; then
			log "giving up on $what after $attempt attempts"
			return 1
		fi
		log "$what failed (attempt $attempt of $attempts); retrying in 2s"
		attempt=$((attempt + 1))
		sleep 2
	done
}

for dir in "$schema_root/temporal/versioned" "$schema_root/visibility/versioned"; do
	if [ ! -d "$dir" ]; then
		log "schema directory $dir not found in this image"
		exit 1
	fi
done

log "PostgreSQL at $host:$port as $user"
with_retries "database $db" setup_database "$db" "$schema_root/temporal/versioned"
with_retries "database $visibility_db" setup_database "$visibility_db" "$schema_root/visibility/versioned"
log "schemas of $db and $visibility_db are up to date"
