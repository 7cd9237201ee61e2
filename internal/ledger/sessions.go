package ledger

// The operator page's ended sessions (docs/design.md, "The operator
// page"): a session signed out before its expiry is recorded here, so that
// every page server serving this ledger refuses a copy of its cookie. The
// page servers keep no state of their own; this table is what they share.
// It holds a session's random ID and operator name, never anything derived
// from a token.

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"allot"
)

// maxSessionID bounds a session ID: the page draws 22 characters.
const maxSessionID = 64

// EndedSession is a page session signed out before it expired.
type EndedSession struct {
	ID       string
	Operator string
	// Expires is when the session would have expired: past it, the row
	// refuses nothing the cookie's own expiry does not, and is pruned.
	Expires time.Time
}

func checkSessionID(id string) error {
	if id == "" || len(id) > maxSessionID || strings.Trim(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
		return invalid("a session ID is 1 to %d characters of A-Z, a-z, 0-9, - and _: the page draws them at sign-in", maxSessionID)
	}
	return nil
}

// EndSession records s as ended at at (zero: the ledger's clock), once:
// ending it again changes nothing. In the same transaction it prunes the
// sessions that have expired by then.
func (l *Ledger) EndSession(ctx context.Context, s EndedSession, at time.Time) error {
	if err := checkSessionID(s.ID); err != nil {
		return err
	}
	if strings.TrimSpace(s.Operator) == "" || allot.CheckText("an operator's name", s.Operator) != nil {
		return invalid("ending a session names its operator: a short name, as in the token file")
	}
	if s.Expires.IsZero() {
		return invalid("ending a session of %s needs its expiry", s.Operator)
	}
	if at.IsZero() {
		at = now()
	}
	return l.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, l.d.q(`DELETE FROM ended_sessions WHERE expires_at <= ?`), l.d.timeArg(at)); err != nil {
			return fmt.Errorf("ledger %s: prune expired sessions: %w", l.where, err)
		}
		if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO ended_sessions (session_id, operator, ended_at, expires_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (session_id) DO NOTHING`), s.ID, s.Operator, l.d.timeArg(at), l.d.timeArg(s.Expires)); err != nil {
			return fmt.Errorf("ledger %s: end a session of %s: %w", l.where, s.Operator, err)
		}
		return nil
	})
}

// SessionEnded reports whether the session id was signed out: one read of
// the primary key.
func (l *Ledger) SessionEnded(ctx context.Context, id string) (bool, error) {
	if err := checkSessionID(id); err != nil {
		return false, err
	}
	var n int
	err := l.r.QueryRowContext(ctx, l.d.q(`SELECT COUNT(*) FROM ended_sessions WHERE session_id = ?`), id).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("ledger %s: read the ended sessions: %w", l.where, l.corruptOr(err))
	}
	return n > 0, nil
}
