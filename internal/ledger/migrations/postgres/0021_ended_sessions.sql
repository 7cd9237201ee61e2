-- allot ledger v21, PostgreSQL: the operator page's ended sessions
-- (docs/design.md, "The operator page"; issue 38). Text keys use the "C"
-- collation, as in 0001.
--
-- ended_sessions: one row per page session signed out before it expired:
-- its ID (random, drawn at sign-in and carried in the signed cookie), the
-- operator it signed in, when it ended and when it would have expired.
-- Every page server reads it, so a copy of a signed-out cookie is refused
-- by all of them. Nothing derived from a token is kept here. A row past
-- its expiry refuses nothing the cookie's own expiry does not: sign-outs
-- prune them (by expires_at).
CREATE TABLE ended_sessions (
    session_id TEXT COLLATE "C" NOT NULL PRIMARY KEY CHECK (session_id <> ''),
    operator   TEXT COLLATE "C" NOT NULL CHECK (operator <> ''),
    ended_at   TIMESTAMPTZ      NOT NULL,
    expires_at TIMESTAMPTZ      NOT NULL
);
CREATE INDEX ended_sessions_by_expiry ON ended_sessions (expires_at);
