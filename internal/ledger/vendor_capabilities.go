package ledger

// What each vendor can promise, as the workers act on it (docs/design.md,
// "What a vendor can promise"): a worker records at start the
// capabilities of every vendor it calls, so that `starter vendor show`
// says them for a Go adapter, which the starter does not link.

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"allot"
)

// RecordedCapabilities are a vendor's capabilities as the last worker to
// start recorded them.
type RecordedCapabilities struct {
	Vendor       string                   `json:"vendor"`
	Capabilities allot.VendorCapabilities `json:"capabilities"`
	Worker       string                   `json:"worker"`
	RecordedAt   time.Time                `json:"recorded_at"`
}

// RecordVendorCapabilities records the capabilities worker acts on, one
// row per vendor (a later worker's replaces an earlier one's), in one
// transaction; a value outside allot's words is refused and nothing is
// written.
func (l *Ledger) RecordVendorCapabilities(ctx context.Context, worker string, caps map[string]allot.VendorCapabilities, at time.Time) error {
	if strings.TrimSpace(worker) == "" {
		return invalid("recording vendor capabilities needs the worker's identity")
	}
	rows := map[string]string{}
	for vendor, c := range caps {
		if strings.TrimSpace(vendor) == "" {
			return invalid("%v: name the vendor", errVendorName)
		}
		if err := c.Check(); err != nil {
			return err
		}
		s, err := allot.MarshalCapabilities(c)
		if err != nil {
			return err
		}
		rows[vendor] = s
	}
	at = vendorAt(at)
	return l.writeTx(ctx, func(tx *sql.Tx) error {
		for vendor, s := range rows {
			if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO vendor_capabilities (vendor, capabilities, worker, recorded_at) VALUES (?, ?, ?, ?)
				ON CONFLICT (vendor) DO UPDATE SET capabilities = excluded.capabilities, worker = excluded.worker, recorded_at = excluded.recorded_at`),
				vendor, s, truncate(worker, 200), l.d.timeArg(at)); err != nil {
				return fmt.Errorf("ledger %s: record the capabilities of vendor %s: %w", l.where, vendor, err)
			}
		}
		return nil
	})
}

// VendorCapabilities lists the capabilities the workers recorded, by
// vendor.
func (l *Ledger) VendorCapabilities(ctx context.Context) (map[string]RecordedCapabilities, error) {
	rows, err := l.r.QueryContext(ctx, l.d.q(`SELECT vendor, capabilities, worker, recorded_at FROM vendor_capabilities ORDER BY vendor`))
	if err != nil {
		return nil, fmt.Errorf("ledger %s: read the vendors' capabilities: %w", l.where, err)
	}
	defer rows.Close()
	out := map[string]RecordedCapabilities{}
	for rows.Next() {
		var (
			r RecordedCapabilities
			s string
		)
		if err := rows.Scan(&r.Vendor, &s, &r.Worker, dbTime{&r.RecordedAt}); err != nil {
			return nil, fmt.Errorf("ledger %s: read the vendors' capabilities: %w", l.where, err)
		}
		if r.Capabilities, err = allot.UnmarshalCapabilities(s); err != nil {
			return nil, fmt.Errorf("ledger %s: vendor %s's recorded capabilities: %w", l.where, r.Vendor, err)
		}
		out[r.Vendor] = r
	}
	return out, rows.Err()
}
