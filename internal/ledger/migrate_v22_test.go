package ledger

import (
	"errors"
	"testing"
	"time"
)

// Migration 0022 (bills by vendor name): a v21 ledger whose default
// vendor's key was rotated holds its bill twice, under two hashes of URL
// and key, each line's drift recorded twice and only the first copy
// acknowledged. After 0022 the vendor's bill is one, under its name, read
// on from the newest watermark; its drift items are one per line and
// class, the acknowledged copy kept; the older hash's lines stay, judged,
// as history.

func TestSQLiteMigrateV21ToV22BillsByVendor(t *testing.T) { testMigrateV21ToV22(t, newSQLiteURL(t)) }

func TestPostgresMigrateV21ToV22BillsByVendor(t *testing.T) {
	postgresDSN(t)
	testMigrateV21ToV22(t, newPostgresURL(t))
}

func testMigrateV21ToV22(t *testing.T, url string) {
	const oldKey, newKey = "1f0a5e0c3c1d4b0f8d2e7a9b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d", "9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c"
	v21 := ledgerAtVersion(t, url, 21)
	early, later := v21.d.timeArg(t0), v21.d.timeArg(t0.Add(time.Hour))
	rawExec(t, v21, `INSERT INTO bill_watermarks (account, vendor, cursor, lines_read, updated_at) VALUES (?, 'default', '2', 2, ?), (?, 'default', '2', 2, ?)`,
		oldKey, early, newKey, later)
	for _, account := range []string{oldKey, newKey} {
		rawExec(t, v21, `INSERT INTO bill_lines (account, line_id, seq, vendor, amount, currency, read_at, judged_at) VALUES
			(?, 'ch_1', 1, 'default', 500, 'USD', ?, ?), (?, 'ch_2', 2, 'default', 700, 'USD', ?, ?)`,
			account, early, early, account, early, early)
		rawExec(t, v21, `INSERT INTO drift_items (account, vendor, line, class, amount, currency, detail, found_at) VALUES
			(?, 'default', 'ch_1', 'charged_unrecorded', 500, 'USD', 'no task', ?), (?, 'default', 'ch_2', 'charged_unrecorded', 700, 'USD', 'no task', ?)`,
			account, early, account, early)
	}
	rawExec(t, v21, `UPDATE drift_items SET acked_at = ?, acked_by = 'ops', ack_reason = 'refunded' WHERE account = ? AND line = 'ch_1'`, early, oldKey)
	if err := v21.Close(); err != nil {
		t.Fatal(err)
	}
	l := openURLT(t, url)
	mustBeAtLatestVersion(t, l)
	ctx := ctxT(t)
	wm, err := l.BillWatermark(ctx, "vendor:default")
	if err != nil || wm.Cursor != "2" || wm.Lines != 2 || wm.Vendor != "default" {
		t.Fatalf("the default vendor's watermark after 0022 = %+v, %v; want the newest hash's, cursor 2 with 2 lines", wm, err)
	}
	items, err := l.DriftItems(ctx, DriftFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 2 {
		t.Fatalf("drift items after 0022: %+v; want one per line", items)
	}
	for _, d := range items {
		if d.Account != "vendor:default" {
			t.Errorf("drift item %d is kept under %q, want vendor:default", d.ID, d.Account)
		}
		if acked := !d.AckedAt.IsZero(); acked != (d.Line == "ch_1") {
			t.Errorf("drift item of %s acknowledged = %v: the acknowledged copy must be the one kept, and only it", d.Line, acked)
		}
	}
	if lines, err := l.UnjudgedBillLines(ctx, "vendor:default", 0, 0); err != nil || len(lines) != 0 {
		t.Fatalf("unjudged lines under vendor:default = %v, %v; want none", lines, err)
	}
	if n := countRows(t, l, "bill_lines"); n != 4 {
		t.Fatalf("%d bill lines after 0022, want the 4 there were", n)
	}
}

// A bill page of another vendor account than the one the bill is of (a
// key replaced by another account's) is refused and writes nothing; the
// account is learnt from the first page that names it.
func TestSQLiteBillOfAnotherAccountIsRefused(t *testing.T) {
	testBillOfAnotherAccount(t, newSQLiteURL(t))
}

func TestPostgresBillOfAnotherAccountIsRefused(t *testing.T) {
	postgresDSN(t)
	testBillOfAnotherAccount(t, newPostgresURL(t))
}

func testBillOfAnotherAccount(t *testing.T, url string) {
	l := openURLT(t, url)
	ctx := ctxT(t)
	line := func(id string) []BillLine {
		return []BillLine{{LineID: id, Amount: 100, Currency: "USD", ChargedAt: t0}}
	}
	if _, err := l.RecordBillPage(ctx, BillPage{Account: "vendor:studio", Vendor: "studio", From: "", Next: "1", Lines: line("ch_1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.RecordBillPage(ctx, BillPage{Account: "vendor:studio", Vendor: "studio", From: "1", Next: "2", Lines: line("ch_2"), VendorAccount: "org-a"}); err != nil {
		t.Fatal(err)
	}
	if wm, err := l.BillWatermark(ctx, "vendor:studio"); err != nil || wm.VendorAccount != "org-a" {
		t.Fatalf("the watermark after a page naming org-a: %+v, %v", wm, err)
	}
	_, err := l.RecordBillPage(ctx, BillPage{Account: "vendor:studio", Vendor: "studio", From: "2", Next: "3", Lines: line("ch_3"), VendorAccount: "org-b"})
	if !errors.Is(err, ErrBillOfAnotherAccount) {
		t.Fatalf("a page of org-b on org-a's bill = %v, want ErrBillOfAnotherAccount", err)
	}
	if wm, err := l.BillWatermark(ctx, "vendor:studio"); err != nil || wm.Cursor != "2" || wm.Lines != 2 {
		t.Fatalf("after the refused page the watermark is %+v (%v), want it at 2 with 2 lines", wm, err)
	}
}
