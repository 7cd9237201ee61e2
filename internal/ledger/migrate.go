package ledger

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Numbered migrations, one directory per dialect: NNNN_name.sql, applied in
// order, each exactly once, recorded in schema_migrations. A migration is
// never edited once released; a change is a new file.
//
//go:embed migrations
var migrationsFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations(dir string) ([]migration, error) {
	entries, err := fs.ReadDir(migrationsFS, dir)
	if err != nil {
		return nil, fmt.Errorf("ledger migrations %s: %w", dir, err)
	}
	var ms []migration
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("ledger migration %s/%s: name it NNNN_description.sql with NNNN > 0", dir, e.Name())
		}
		body, err := fs.ReadFile(migrationsFS, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		// Gaps or duplicates would make "the schema is at version N" ambiguous.
		if m.version != i+1 {
			return nil, fmt.Errorf("ledger migrations %s: expected version %d, found %s: number them 0001, 0002, ... without gaps", dir, i+1, m.name)
		}
	}
	return ms, nil
}

const createSchemaMigrations = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	name       TEXT NOT NULL,
	applied_at TEXT NOT NULL
)`

// migrate brings the schema up to date in one transaction, so that a crash
// leaves either the old schema or the new one, never half of it. upTo > 0
// stops at that version (tests use it to build an older ledger); 0 applies
// every migration.
func (l *Ledger) migrate(ctx context.Context, upTo int) error {
	ms, err := loadMigrations(l.d.migrations)
	if err != nil {
		return err
	}
	if upTo > 0 && upTo < len(ms) {
		ms = ms[:upTo]
	}
	created := false
	err = l.writeTx(ctx, func(tx *sql.Tx) error {
		if l.d.lockMigrations != "" {
			// Two workers starting at once must not both apply 0001.
			if _, err := tx.ExecContext(ctx, l.d.q(l.d.lockMigrations), migrationLockKey); err != nil {
				return fmt.Errorf("ledger %s: lock for migration: %w", l.where, err)
			}
		}
		if _, err := tx.ExecContext(ctx, createSchemaMigrations); err != nil {
			return fmt.Errorf("ledger %s: create schema_migrations: %w", l.where, err)
		}
		current, err := schemaVersion(ctx, tx, l.d)
		if err != nil {
			return fmt.Errorf("ledger %s: %w", l.where, err)
		}
		if current > len(ms) {
			return fmt.Errorf("ledger %s has schema version %d but this build knows only up to %d: upgrade allot rather than run an older build against it", l.where, current, len(ms))
		}
		created = current == 0 && len(ms) > 0
		for _, m := range ms[current:] {
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("ledger %s: apply migration %s: %w", l.where, m.name, err)
			}
			if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`),
				m.version, m.name, now().Format(timeTextLayout)); err != nil {
				return fmt.Errorf("ledger %s: record migration %s: %w", l.where, m.name, err)
			}
		}
		return nil
	})
	if err == nil && created {
		l.created = true
	}
	return err
}

// checkSchema is OpenReadOnly's stand-in for migrate: it only verifies that
// the schema is the one this build reads.
func (l *Ledger) checkSchema(ctx context.Context) error {
	ms, err := loadMigrations(l.d.migrations)
	if err != nil {
		return err
	}
	current, err := l.readSchemaVersion(ctx)
	if err != nil {
		return err
	}
	switch {
	case current < len(ms):
		return fmt.Errorf("ledger %s has schema version %d, this build needs %d: open it read-write once (e.g. start the worker) to migrate it", l.where, current, len(ms))
	case current > len(ms):
		return fmt.Errorf("ledger %s has schema version %d but this build knows only up to %d: upgrade allot", l.where, current, len(ms))
	}
	return nil
}

// readSchemaVersion reads the version of an existing ledger's schema; a
// database without allot's schema is ErrNotCreated. Anything else that
// fails (a damaged file, an unreachable server) is that error, never advice
// to create the ledger.
func (l *Ledger) readSchemaVersion(ctx context.Context) (int, error) {
	v, err := schemaVersion(ctx, l.r, l.d)
	switch {
	case err == nil:
		return v, nil
	case noSuchTable(err):
		return 0, notCreatedError{fmt.Errorf("ledger %s has no allot schema (%v): check the URL", l.where, err)}
	}
	return 0, fmt.Errorf("ledger %s: %w", l.where, err)
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func schemaVersion(ctx context.Context, db queryer, d *dialect) (int, error) {
	var v int
	if err := db.QueryRowContext(ctx, d.q(`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`)).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}
