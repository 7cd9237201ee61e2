// Package deploy holds the files of allot's production-like Temporal stack,
// defined in docker-compose.temporal.yml at the repository root: the scripts
// its one-shot services run (scripts/), the PostgreSQL init script that creates
// the roles and allot's ledger database (postgres-init/), and the server's
// dynamic config (temporal/). It has no code; its tests check that the compose
// file, those files and allot's own names agree.
package deploy
