-- allot ledger v21, SQLite: the operator page's ended sessions
-- (docs/design.md, "The operator page"; issue 38).
--
-- ended_sessions: one row per page session signed out before it expired:
-- its ID (random, drawn at sign-in and carried in the signed cookie), the
-- operator it signed in, when it ended and when it would have expired.
-- Every page server reads it, so a copy of a signed-out cookie is refused
-- by all of them. Nothing derived from a token is kept here. A row past
-- its expiry refuses nothing the cookie's own expiry does not: sign-outs
-- prune them (by expires_at).
CREATE TABLE ended_sessions (
    session_id TEXT NOT NULL PRIMARY KEY CHECK (session_id <> ''),
    operator   TEXT NOT NULL CHECK (operator <> ''),
    ended_at   TEXT NOT NULL,
    expires_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX ended_sessions_by_expiry ON ended_sessions (expires_at);
