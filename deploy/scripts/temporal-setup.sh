#!/bin/sh
# Prepares a Temporal namespace for allot: creates it if it is missing and
# registers allot's custom search attributes. Run by the temporal-setup service
# of docker-compose.temporal.yml once the server is healthy; it works against
# any Temporal server the `temporal` CLI can reach.
#
#   temporal-setup.sh AllotPipeline=Keyword AllotSequence=Int ...
#
# Idempotent: an existing namespace is kept as it is, and attributes already
# registered with the requested type are left alone. An attribute registered
# with another type is an error (the CLI refuses it; it cannot be changed in
# place), and so the script exits non-zero.
#
# POSIX sh on purpose: the admin-tools image need not have bash.
#
# Environment:
#   TEMPORAL_ADDRESS            frontend host:port (required)
#   TEMPORAL_NAMESPACE          namespace (default "default")
#   ALLOT_NAMESPACE_RETENTION   retention of a namespace created here (default 168h)
#   SETUP_ATTEMPTS              tries per step before giving up (default 60, 2 s apart)
set -eu

address="${TEMPORAL_ADDRESS:?TEMPORAL_ADDRESS must be set, e.g. temporal:7233}"
namespace="${TEMPORAL_NAMESPACE:-default}"
retention="${ALLOT_NAMESPACE_RETENTION:-168h}"
attempts="${SETUP_ATTEMPTS:-60}"

log() {
	echo "temporal-setup: $*"
}

if [ "$#" -eq 0 ]; then
	echo "usage: $0 NAME=Type [NAME=Type ...]" >&2
	exit 2
fi

# Turn the NAME=Type arguments into --name NAME --type Type pairs.
count=$#
while [ "$count" -gt 0 ]; do
	pair="$1"
	shift
	count=$((count - 1))
	name="${pair%%=*}"
	type="${pair#*=}"
	if [ -z "$name" ] || [ -z "$type" ] || [ "$name" = "$pair" ]; then
		echo "temporal-setup: bad search attribute $pair (want NAME=Type)" >&2
		exit 2
	fi
	set -- "$@" --name "$name" --type "$type"
done

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

ensure_namespace() {
	if temporal operator namespace describe --address "$address" --namespace "$namespace" >/dev/null 2>&1; then
		log "namespace $namespace exists"
		return 0
	fi
	log "creating namespace $namespace (retention $retention)"
	temporal operator namespace create --address "$address" --namespace "$namespace" \
		--retention "$retention" --description "allot"
}

with_retries "cluster health at $address" temporal operator cluster health --address "$address"
with_retries "namespace $namespace" ensure_namespace
with_retries "search attributes in $namespace" \
	temporal operator search-attribute create --address "$address" --namespace "$namespace" "$@"

# For the log: what the namespace has now.
temporal operator search-attribute list --address "$address" --namespace "$namespace" || true
log "namespace $namespace is ready for allot"
