package ledger

// The limits the workers enforce (docs/design.md, "Vendor controls"): each
// worker records, at start, the controls it applies per vendor, so that
// `starter vendor list` and `episode show` show what the workers act on,
// not the environment of the process that asks.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"allot/pipeline"
)

// EnforcedLimits are a vendor's limits as the last worker to start
// recorded them: Limits is the vendor's controls as JSON (the pipeline
// package's VendorLimits; "{}" for none).
type EnforcedLimits struct {
	Vendor     string    `json:"vendor"`
	Limits     string    `json:"limits"`
	Worker     string    `json:"worker"`
	RecordedAt time.Time `json:"recorded_at"`
}

// RecordLimitsOf records the limits a starting worker enforces for every
// vendor of set (the default one with its ALLOT_VENDOR_* settings), so that
// `starter vendor list` and `episode show` show what the workers act on
// rather than the asking process's environment.
func (l *Ledger) RecordLimitsOf(ctx context.Context, set *pipeline.Set, worker string) error {
	limits := map[string]string{}
	for _, name := range set.ControlledVendors() {
		b, err := json.Marshal(set.Limits(name))
		if err != nil {
			return fmt.Errorf("record the limits of vendor %s: %w", name, err)
		}
		limits[name] = string(b)
	}
	return l.RecordEnforcedLimits(ctx, worker, limits, time.Time{})
}

// RecordEnforcedLimits records the limits worker enforces, one row per
// vendor (a later worker's record replaces an earlier one's), in one
// transaction.
func (l *Ledger) RecordEnforcedLimits(ctx context.Context, worker string, limits map[string]string, at time.Time) error {
	if strings.TrimSpace(worker) == "" {
		return invalid("recording vendor limits needs the worker's identity")
	}
	at = vendorAt(at)
	return l.writeTx(ctx, func(tx *sql.Tx) error {
		for vendor, lim := range limits {
			if strings.TrimSpace(vendor) == "" {
				return invalid("%v: name the vendor", errVendorName)
			}
			if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO vendor_limits (vendor, limits, worker, recorded_at) VALUES (?, ?, ?, ?)
				ON CONFLICT (vendor) DO UPDATE SET limits = excluded.limits, worker = excluded.worker, recorded_at = excluded.recorded_at`),
				vendor, lim, truncate(worker, 200), l.d.timeArg(at)); err != nil {
				return fmt.Errorf("ledger %s: record the limits of vendor %s: %w", l.where, vendor, err)
			}
		}
		return nil
	})
}

// EnforcedVendorLimits lists the limits the workers recorded, by vendor.
func (l *Ledger) EnforcedVendorLimits(ctx context.Context) (map[string]EnforcedLimits, error) {
	rows, err := l.r.QueryContext(ctx, l.d.q(`SELECT vendor, limits, worker, recorded_at FROM vendor_limits ORDER BY vendor`))
	if err != nil {
		return nil, fmt.Errorf("ledger %s: read the enforced vendor limits: %w", l.where, err)
	}
	defer rows.Close()
	out := map[string]EnforcedLimits{}
	for rows.Next() {
		var e EnforcedLimits
		if err := rows.Scan(&e.Vendor, &e.Limits, &e.Worker, dbTime{&e.RecordedAt}); err != nil {
			return nil, fmt.Errorf("ledger %s: read the enforced vendor limits: %w", l.where, err)
		}
		out[e.Vendor] = e
	}
	return out, rows.Err()
}
