package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// ID is the ledger's identity: a UUID created once, when the ledger is
// first opened read-write, and kept forever. Workflows carry the ID of the
// ledger that allocated them; a worker on another ledger refuses their
// work. "" for a ledger opened read-only before it ever had one.
func (l *Ledger) ID() string { return l.id }

// ensureIdentity reads the ledger's identity, creating it if it has none
// (read-write opens only). Concurrent first opens agree: the row is keyed by
// a constant, and the loser reads the winner's.
func (l *Ledger) ensureIdentity(ctx context.Context) error {
	id, err := l.readIdentity(ctx, l.r)
	if err != nil || id != "" || l.readOnly {
		l.id = id
		return err
	}
	err = l.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO ledger_identity (singleton, ledger_id, created_at) VALUES (1, ?, ?)
			ON CONFLICT (singleton) DO NOTHING`), uuid.NewString(), l.d.timeArg(now())); err != nil {
			return fmt.Errorf("ledger %s: create its identity: %w", l.where, err)
		}
		id, err = l.readIdentity(ctx, tx)
		return err
	})
	l.id = id
	return err
}

func (l *Ledger) readIdentity(ctx context.Context, db queryer) (string, error) {
	var id string
	err := db.QueryRowContext(ctx, `SELECT ledger_id FROM ledger_identity WHERE singleton = 1`).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("ledger %s: read its identity: %w", l.where, err)
	}
	return id, nil
}
