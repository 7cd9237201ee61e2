package ledger

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"allot"
)

// Conformance tests for the vendor's bill and its drift items (bill.go, bill_drift.go);
// registered in runConformance so that both drivers run them.

// billLine is a charge of 2.50 EUR unless amount says otherwise.
func billLine(id, ref, key string, amount int64) BillLine {
	return BillLine{LineID: id, TaskRef: ref, IdempotencyKey: key, Amount: amount, Currency: "EUR", ChargedAt: t0}
}

func refundLine(id, ref, key string, amount int64) BillLine {
	ln := billLine(id, ref, key, amount)
	ln.Refund = true
	return ln
}

// mustBillPage stores a page of account (of vendor "acme") read from from,
// and returns how many lines were new.
func mustBillPage(t *testing.T, l *Ledger, account, from, next string, lines ...BillLine) int {
	t.Helper()
	n, err := l.RecordBillPage(ctxT(t), BillPage{Account: account, Vendor: "acme", From: from, Next: next, Lines: lines})
	if err != nil {
		t.Fatalf("RecordBillPage(%s, %q -> %q): %v", account, from, next, err)
	}
	return n
}

func mustUnjudged(t *testing.T, l *Ledger, account string, after int64, limit int) []BillLine {
	t.Helper()
	lines, err := l.UnjudgedBillLines(ctxT(t), account, after, limit)
	if err != nil {
		t.Fatalf("UnjudgedBillLines(%s, %d, %d): %v", account, after, limit, err)
	}
	return lines
}

func billLineIDs(lines []BillLine) []string {
	var out []string
	for _, ln := range lines {
		out = append(out, ln.LineID)
	}
	return out
}

// driftOfClass is an item of class with a detail, 2.50 EUR at stake.
func driftOfClass(class allot.DriftClass) *DriftItem {
	return &DriftItem{Class: class, Amount: 250, Currency: "EUR", Detail: "planted by the test: " + string(class)}
}

func mustDriftItems(t *testing.T, l *Ledger, f DriftFilter) []DriftItem {
	t.Helper()
	items, err := l.DriftItems(ctxT(t), f)
	if err != nil {
		t.Fatalf("DriftItems(%+v): %v", f, err)
	}
	return items
}

func driftLines(items []DriftItem) []string {
	var out []string
	for _, d := range items {
		out = append(out, d.Account+"/"+d.Line+"/"+string(d.Class))
	}
	return out
}

// dumpBillTables reads every row of the bill's tables, every column, so
// that a test can show that a refused call wrote nothing.
func dumpBillTables(t *testing.T, l *Ledger) string {
	t.Helper()
	var b strings.Builder
	for _, tb := range []struct{ name, order string }{
		{"bill_watermarks", "account"}, {"bill_lines", "account, seq"}, {"drift_items", "id"},
	} {
		rows, err := l.w.QueryContext(ctxT(t), `SELECT * FROM `+tb.name+` ORDER BY `+tb.order)
		if err != nil {
			t.Fatalf("dump %s: %v", tb.name, err)
		}
		cols, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			vals := make([]any, len(cols))
			for i := range vals {
				vals[i] = new(any)
			}
			if err := rows.Scan(vals...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s:", tb.name)
			for i, v := range vals {
				fmt.Fprintf(&b, " %s=%v", cols[i], *(v.(*any)))
			}
			b.WriteString("\n")
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		_ = rows.Close()
	}
	return b.String()
}

func mustBillUnchanged(t *testing.T, l *Ledger, what, before string) {
	t.Helper()
	if after := dumpBillTables(t, l); after != before {
		t.Fatalf("%s wrote:\nbefore:\n%s\nafter:\n%s", what, before, after)
	}
}

func testBillWatermark(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	if w, err := l.BillWatermark(ctx, "acct-1"); err != nil || w != (BillWatermark{}) {
		t.Fatalf("BillWatermark of a new account = %+v, %v; want the zero value", w, err)
	}
	if n := mustBillPage(t, l, "acct-1", "", "c1", billLine("l1", "r1", "k1", 250)); n != 1 {
		t.Fatalf("first page added %d lines, want 1", n)
	}
	w, err := l.BillWatermark(ctx, "acct-1")
	if err != nil || w.Account != "acct-1" || w.Vendor != "acme" || w.Cursor != "c1" || w.Lines != 1 || w.UpdatedAt.IsZero() {
		t.Fatalf("watermark after the first page = %+v, %v; want acct-1 of acme at c1 with 1 line", w, err)
	}

	// A page read from a watermark the ledger has moved past is refused,
	// and nothing of it is stored: the first page again, a page from a
	// cursor never stored, a first page of an account read from a cursor.
	before := dumpBillTables(t, l)
	for _, p := range []BillPage{
		{Account: "acct-1", Vendor: "acme", From: "", Next: "c1", Lines: []BillLine{billLine("l1", "r1", "k1", 250), billLine("l2", "r2", "k2", 250)}},
		{Account: "acct-1", Vendor: "acme", From: "c0", Next: "c2", Lines: []BillLine{billLine("l2", "r2", "k2", 250)}},
		{Account: "acct-2", Vendor: "acme", From: "c1", Next: "c2", Lines: []BillLine{billLine("l2", "r2", "k2", 250)}},
	} {
		n, err := l.RecordBillPage(ctx, p)
		if !errors.Is(err, ErrBillWatermarkMoved) || n != 0 {
			t.Fatalf("RecordBillPage(%s from %q) = %d, %v; want ErrBillWatermarkMoved", p.Account, p.From, n, err)
		}
		if !strings.Contains(err.Error(), p.Account) || !strings.Contains(err.Error(), "nothing was written") {
			t.Errorf("refusal %q does not name the account and say nothing was written", err)
		}
	}
	// The account is acme's: another vendor's page is refused whole.
	_, err = l.RecordBillPage(ctx, BillPage{Account: "acct-1", Vendor: "other", From: "c1", Next: "c2", Lines: []BillLine{billLine("l2", "r2", "k2", 250)}})
	wantErr(t, "a page of another vendor", err, ErrInvalidInput, `"acme"`, `"other"`)
	mustBillUnchanged(t, l, "refused pages", before)

	// A page that does not move the cursor (nothing new at the end of the
	// bill) is stored from it.
	if n := mustBillPage(t, l, "acct-1", "c1", "c1"); n != 0 {
		t.Fatalf("an empty page added %d lines", n)
	}
	if w, _ := l.BillWatermark(ctx, "acct-1"); w.Cursor != "c1" || w.Lines != 1 {
		t.Fatalf("watermark after an empty page = %+v", w)
	}
}

func testBillWatermarkConcurrent(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	for round := range 6 {
		account := fmt.Sprintf("acct-%d", round)
		from := ""
		if round%2 == 1 { // an existing watermark, and the account's first page
			from = "c0"
			mustBillPage(t, l, account, "", from, billLine("first", "r-first", "", 100))
		}
		const n = 2
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			errs  = make([]error, n)
		)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = l.RecordBillPage(ctx, BillPage{Account: account, Vendor: "acme", From: from, Next: fmt.Sprintf("next-%d", i),
					Lines: []BillLine{billLine(fmt.Sprintf("g%d-a", i), "", "", 100), billLine(fmt.Sprintf("g%d-b", i), "", "", 100)}})
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner < 0:
				winner = i
			case err == nil:
				t.Fatalf("round %d: both pages read from %q were stored", round, from)
			case !errors.Is(err, ErrBillWatermarkMoved):
				t.Fatalf("round %d: page %d: %v; want ErrBillWatermarkMoved", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: neither page was stored: %v", round, errs)
		}
		w, err := l.BillWatermark(ctx, account)
		if err != nil || w.Cursor != fmt.Sprintf("next-%d", winner) {
			t.Fatalf("round %d: watermark %+v, %v; want the winner's next-%d", round, w, err, winner)
		}
		var want []string
		if from != "" {
			want = append(want, "first")
		}
		want = append(want, fmt.Sprintf("g%d-a", winner), fmt.Sprintf("g%d-b", winner))
		if got := billLineIDs(mustUnjudged(t, l, account, 0, 0)); !slices.Equal(got, want) || w.Lines != int64(len(want)) {
			t.Fatalf("round %d: lines %v (watermark counts %d); want only the winner's %v", round, got, w.Lines, want)
		}
	}
}

func testBillLinesStoredOnce(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	// A line twice in one page, and again in the next page with another
	// amount: stored once, as first read.
	if n := mustBillPage(t, l, "acct", "", "c1", billLine("a", "r-a", "k-a", 100), billLine("b", "r-b", "k-b", 200), billLine("a", "r-a", "k-a", 100)); n != 2 {
		t.Fatalf("page 1 added %d lines, want 2", n)
	}
	if n := mustBillPage(t, l, "acct", "c1", "c2", billLine("b", "r-b", "k-b", 999), refundLine("c", "r-a", "k-a", 50)); n != 1 {
		t.Fatalf("page 2 added %d lines, want 1", n)
	}
	// Another account has its own lines and its own numbering.
	if n := mustBillPage(t, l, "other", "", "x1", billLine("a", "r-a", "k-a", 100)); n != 1 {
		t.Fatalf("another account's page added %d lines, want 1", n)
	}
	lines := mustUnjudged(t, l, "acct", 0, 0)
	if got := billLineIDs(lines); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("lines %v, want a b c", got)
	}
	for i, ln := range lines {
		if ln.Seq != int64(i+1) {
			t.Errorf("line %s has seq %d, want %d: the reading order", ln.LineID, ln.Seq, i+1)
		}
		if ln.Account != "acct" || ln.Vendor != "acme" || ln.Currency != "EUR" || !ln.ChargedAt.Equal(t0) || ln.ReadAt.IsZero() || !ln.JudgedAt.IsZero() {
			t.Errorf("line %+v: want it of acct, acme, EUR, charged at t0, read, not judged", ln)
		}
	}
	if b := lines[1]; b.Amount != 200 || b.TaskRef != "r-b" || b.IdempotencyKey != "k-b" || b.Refund {
		t.Errorf("line b read again changed: %+v; want the first read's 200", b)
	}
	if c := lines[2]; !c.Refund || c.Amount != 50 {
		t.Errorf("refund line c = %+v", c)
	}
	if other := mustUnjudged(t, l, "other", 0, 0); len(other) != 1 || other[0].Seq != 1 {
		t.Fatalf("the other account's lines %+v; want one, seq 1", other)
	}
	if w, _ := l.BillWatermark(ctx, "acct"); w.Lines != 3 {
		t.Fatalf("watermark counts %d lines, want 3", w.Lines)
	}
	// Pages and limits.
	if got := billLineIDs(mustUnjudged(t, l, "acct", 1, 1)); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("UnjudgedBillLines(after 1, limit 1) = %v, want b", got)
	}
	if got := billLineIDs(mustUnjudged(t, l, "acct", 3, 0)); len(got) != 0 {
		t.Fatalf("UnjudgedBillLines after the last = %v", got)
	}
	_, err := l.UnjudgedBillLines(ctx, "acct", 0, -1)
	wantErr(t, "a negative limit", err, ErrInvalidInput, "-1")
}

func testBillInvalidPage(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	mustBillPage(t, l, "acct", "", "c1", billLine("a", "r-a", "k-a", 100))
	before := dumpBillTables(t, l)
	good := billLine("ok", "r", "k", 1)
	for _, tc := range []struct {
		name  string
		page  BillPage
		parts []string
	}{
		{"no account", BillPage{Vendor: "acme", From: "c1", Next: "c2", Lines: []BillLine{good}}, []string{"account"}},
		{"no line ID", BillPage{Account: "acct", Vendor: "acme", From: "c1", Next: "c2", Lines: []BillLine{good, billLine("", "r", "k", 1)}}, []string{"line 2", "line ID"}},
		{"negative", BillPage{Account: "acct", Vendor: "acme", From: "c1", Next: "c2", Lines: []BillLine{good, billLine("neg", "r", "k", -1)}}, []string{`"neg"`, "-1"}},
		{"over the bound", BillPage{Account: "acct", Vendor: "acme", From: "c1", Next: "c2", Lines: []BillLine{billLine("big", "r", "k", allot.MaxAmount+1)}}, []string{`"big"`}},
		{"lowercase currency", BillPage{Account: "acct", Vendor: "acme", From: "c1", Next: "c2", Lines: []BillLine{{LineID: "cur", Amount: 1, Currency: "eur"}}}, []string{`"cur"`, "EUR"}},
		{"no currency", BillPage{Account: "acct", Vendor: "acme", From: "c1", Next: "c2", Lines: []BillLine{{LineID: "cur", Amount: 1}}}, []string{`"cur"`, "ISO 4217"}},
		{"another account's line", BillPage{Account: "acct", Vendor: "acme", From: "c1", Next: "c2", Lines: []BillLine{{Account: "x", LineID: "o", Amount: 1, Currency: "EUR"}}}, []string{`"x"`}},
	} {
		n, err := l.RecordBillPage(ctx, tc.page)
		wantErr(t, tc.name, err, ErrInvalidInput, tc.parts...)
		if n != 0 {
			t.Errorf("%s: %d lines added", tc.name, n)
		}
	}
	mustBillUnchanged(t, l, "refused pages", before)
	if allot.ErrorType(func() error { _, err := l.RecordBillPage(ctx, BillPage{}); return err }()) != allot.InvalidInput {
		t.Fatal("a refused page's error is not of type InvalidInput")
	}
}

func testBillJudgeOnce(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	mustBillPage(t, l, "acct", "", "c1", billLine("a", "r-a", "k-a", 100), billLine("b", "r-b", "k-b", 200), billLine("c", "r-c", "k-c", 300))
	mustBillPage(t, l, "other", "", "c1", billLine("a", "r-a", "k-a", 100))

	// A line that matches: judged without an item; judged again, nothing.
	for range 2 {
		if rec, err := l.JudgeBillLine(ctx, "acct", "a", nil); err != nil || rec {
			t.Fatalf("JudgeBillLine(a, nil) = %v, %v; want judged without an item", rec, err)
		}
	}
	// A line that does not: its item, once, however often it is judged.
	d := driftOfClass(allot.DriftUnrecorded)
	d.Account, d.Line, d.Vendor = "ignored", "ignored", "ignored" // the line's, whatever the caller says
	d.RemoteRef, d.IdempotencyKey = "r-b", "k-b"
	if rec, err := l.JudgeBillLine(ctx, "acct", "b", d); err != nil || !rec {
		t.Fatalf("JudgeBillLine(b, item) = %v, %v; want the item recorded", rec, err)
	}
	for _, again := range []*DriftItem{d, driftOfClass(allot.DriftDoubleCharge), nil} {
		if rec, err := l.JudgeBillLine(ctx, "acct", "b", again); err != nil || rec {
			t.Fatalf("JudgeBillLine(b) again = %v, %v; want nothing recorded", rec, err)
		}
	}
	items := mustDriftItems(t, l, DriftFilter{})
	if len(items) != 1 {
		t.Fatalf("items %v; want the one of line b", driftLines(items))
	}
	it := items[0]
	if it.Account != "acct" || it.Line != "b" || it.Vendor != "acme" || it.Class != allot.DriftUnrecorded || it.Amount != 250 ||
		it.Currency != "EUR" || it.RemoteRef != "r-b" || it.IdempotencyKey != "k-b" || it.Detail != d.Detail || it.FoundAt.IsZero() || !it.AckedAt.IsZero() {
		t.Fatalf("item %+v; want account acct line b of acme, as given", it)
	}
	if got := billLineIDs(mustUnjudged(t, l, "acct", 0, 0)); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("unjudged after judging a and b: %v; want c", got)
	}
	if got := billLineIDs(mustUnjudged(t, l, "other", 0, 0)); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("judging acct's line a judged another account's: unjudged %v", got)
	}

	// Refusals write nothing: no such line, an item the ledger cannot keep.
	before := dumpBillTables(t, l)
	_, err := l.JudgeBillLine(ctx, "acct", "zz", nil)
	wantErr(t, "judging a line never stored", err, ErrInvalidInput, `"zz"`)
	for name, bad := range map[string]*DriftItem{
		"class":    {Class: "lost", Amount: 1, Currency: "EUR", Detail: "x"},
		"amount":   {Class: allot.DriftRefunded, Amount: -1, Currency: "EUR", Detail: "x"},
		"currency": {Class: allot.DriftRefunded, Amount: 1, Currency: "euro", Detail: "x"},
		"detail":   {Class: allot.DriftRefunded, Amount: 1, Currency: "EUR", Detail: " "},
	} {
		_, err := l.JudgeBillLine(ctx, "acct", "c", bad)
		wantErr(t, "an item without a valid "+name, err, ErrInvalidInput)
	}
	mustBillUnchanged(t, l, "refused judgements", before)

	// Concurrent judges of one line record its item once.
	const n = 6
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		recorded int
		start    = make(chan struct{})
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			rec, err := l.JudgeBillLine(ctx, "acct", "c", driftOfClass(allot.DriftAmountDiffers))
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if rec {
				recorded++
			}
		}()
	}
	close(start)
	wg.Wait()
	if got := mustDriftItems(t, l, DriftFilter{Account: "acct"}); recorded != 1 || len(got) != 2 {
		t.Fatalf("%d concurrent judges recorded %d items; the ledger has %v; want line c's once", n, recorded, driftLines(got))
	}
}

func testBillRecordDriftOnce(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	d := *driftOfClass(allot.DriftUncharged)
	d.Account, d.Vendor, d.Line = "acct", "acme", allot.DriftLineOfCost("vt_1")
	d.Pipeline, d.EpisodeID, d.Step, d.Revision, d.Period, d.RemoteRef = "weekly", "2026-W32-0", "video", 1, "2026-W32", "vt_1"
	first, created, err := l.RecordDrift(ctx, d)
	if err != nil || !created || first.ID == 0 || first.Line != "cost:vt_1" || first.Pipeline != "weekly" || first.Revision != 1 || first.Period != "2026-W32" {
		t.Fatalf("RecordDrift = %+v, %v, %v; want it created as given", first, created, err)
	}
	d.Detail, d.Amount = "another reading", 999
	again, created, err := l.RecordDrift(ctx, d)
	if err != nil || created || again != first {
		t.Fatalf("RecordDrift again = %+v, %v, %v; want the stored %+v", again, created, err, first)
	}
	// Another class, or another account, of the same line is another item.
	d.Class = allot.DriftAmountDiffers
	if _, created, err := l.RecordDrift(ctx, d); err != nil || !created {
		t.Fatalf("RecordDrift of another class = %v, %v; want it created", created, err)
	}
	d.Account = "acct-2"
	if _, created, err := l.RecordDrift(ctx, d); err != nil || !created {
		t.Fatalf("RecordDrift of another account = %v, %v; want it created", created, err)
	}
	if got := mustDriftItems(t, l, DriftFilter{}); len(got) != 3 {
		t.Fatalf("items %v; want 3", driftLines(got))
	}
	before := dumpBillTables(t, l)
	for name, bad := range map[string]DriftItem{
		"no account": {Line: "cost:x", Class: allot.DriftUncharged, Amount: 1, Currency: "EUR", Detail: "x"},
		"no line":    {Account: "a", Class: allot.DriftUncharged, Amount: 1, Currency: "EUR", Detail: "x"},
		"over":       {Account: "a", Line: "cost:x", Class: allot.DriftUncharged, Amount: allot.MaxAmount + 1, Currency: "EUR", Detail: "x"},
	} {
		_, _, err := l.RecordDrift(ctx, bad)
		wantErr(t, name, err, ErrInvalidInput)
	}
	mustBillUnchanged(t, l, "refused drift items", before)
}

func testBillEarlierCharge(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	mustBillPage(t, l, "acct", "", "c1",
		billLine("k1", "r1", "K", 100),     // seq 1
		refundLine("k2", "r1", "K", 100),   // seq 2
		billLine("k3", "r2", "K", 100),     // seq 3: K charged again
		billLine("f1", "R", "", 100),       // seq 4
		billLine("f2", "R", "", 100),       // seq 5: R charged again, no keys
		refundLine("g1", "G", "", 100),     // seq 6
		billLine("g2", "G", "", 100),       // seq 7: only a refund before it
		billLine("h1", "R", "K2", 100),     // seq 8: R charged before, but its key K2 is new
		billLine("none", "", "", 100),      // seq 9
		refundLine("r9", "R", "", 100),     // seq 10
		billLine("k4", "other", "K", 100),  // seq 11
		refundLine("kr1", "RR", "KR", 100), // seq 12
		billLine("kr2", "RR", "KR", 100))   // seq 13: only a refund of KR before it
	mustBillPage(t, l, "acct-2", "", "c1", billLine("x1", "R2", "K3", 100), billLine("x2", "R2", "K3", 100))
	mustBillPage(t, l, "acct-3", "", "c1", billLine("y1", "R2", "K3", 100))
	lines := map[string]BillLine{}
	for _, a := range []string{"acct", "acct-2", "acct-3"} {
		for _, ln := range mustUnjudged(t, l, a, 0, 0) {
			lines[a+"/"+ln.LineID] = ln
		}
	}
	for line, want := range map[string]string{
		"acct/k1": "", "acct/k2": "k1", "acct/k3": "k1", "acct/k4": "k1",
		"acct/f1": "", "acct/f2": "f1", "acct/r9": "f1",
		"acct/g1": "", "acct/g2": "",
		"acct/h1": "", "acct/none": "", "acct/kr1": "", "acct/kr2": "",
		"acct-2/x1": "", "acct-2/x2": "x1", "acct-3/y1": "",
	} {
		ln, ok := lines[line]
		if !ok {
			t.Fatalf("line %s not stored", line)
		}
		got, err := l.EarlierBillCharge(ctx, ln)
		if err != nil || got != want {
			t.Errorf("EarlierBillCharge(%s seq %d) = %q, %v; want %q", line, ln.Seq, got, err, want)
		}
	}
}

func testBillPaidTaskBilled(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	video, cover := paidRef(ep, "video", 0), paidRef(ep, "cover", 0)
	mustIntent(t, l, video)
	mustSubmit(t, l, video, "vt_1", 250)
	mustIntent(t, l, cover) // an intent: a key, no reference yet
	for _, tc := range []struct {
		name, ref, key string
		want           PaidTaskRef
		byKey, ok      bool
	}{
		{"by reference", "vt_1", "", video, false, true},
		{"by reference, whatever the key", "vt_1", testKey(cover), video, false, true},
		{"by key, the reference unknown", "vt_unknown", testKey(video), video, true, true},
		{"by key alone", "", testKey(cover), cover, true, true},
		{"neither", "vt_unknown", "key-unknown", PaidTaskRef{}, false, false},
		{"nothing", "", "", PaidTaskRef{}, false, false},
	} {
		pt, byKey, ok, err := l.PaidTaskBilled(ctx, tc.ref, tc.key)
		if err != nil || ok != tc.ok || byKey != tc.byKey || pt.PaidTaskRef != tc.want {
			t.Errorf("%s: PaidTaskBilled(%q, %q) = %+v, byKey %v, ok %v, %v; want %+v, %v, %v", tc.name, tc.ref, tc.key, pt.PaidTaskRef, byKey, ok, err, tc.want, tc.byKey, tc.ok)
		}
	}
}

// billPlan pins video to vendor acme; cover is the default vendor's.
const billPlan = `[{"name":"video","kind":"paid","vendor":"acme"},{"name":"cover","kind":"paid"}]`

func mustUnbilled(t *testing.T, l *Ledger, account string, before time.Time, after string, limit int) []UnbilledCost {
	t.Helper()
	us, err := l.UnbilledCosts(ctxT(t), account, before, after, limit)
	if err != nil {
		t.Fatalf("UnbilledCosts(%s, %s, %q, %d): %v", account, before, after, limit, err)
	}
	return us
}

func unbilledRefs(us []UnbilledCost) []string {
	var out []string
	for _, u := range us {
		out = append(out, u.RemoteRef)
	}
	return out
}

func testBillUnbilledCosts(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	ep := alloc(t, l, "weekly", "k1", "2026-W32", 0).Episode
	if _, err := l.PinPlan(ctx, "weekly", ep.ID, billPlan); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct{ step, ref string }{{"video", "vt_1"}, {"cover", "ct_1"}} {
		r := paidRef(ep, s.step, 0)
		mustIntent(t, l, r)
		mustSubmit(t, l, r, s.ref, 250)
	}
	// An older episode without a plan, whose cost was recorded at t0.
	old := alloc(t, l, "weekly", "k0", "2026-W31", 0).Episode
	oldRef := paidRef(old, "video", 0)
	rawInsertPaidTask(t, l, oldRef, "key-old", string(allot.PaidSucceeded), "old_1")
	rawInsertCost(t, l, "old_1", oldRef, 400)
	later := time.Now().Add(time.Hour)

	all := mustUnbilled(t, l, "acct", later, "", 0)
	if got := unbilledRefs(all); !slices.Equal(got, []string{"ct_1", "old_1", "vt_1"}) {
		t.Fatalf("unbilled %v, want every cost in remote reference order", got)
	}
	byRef := map[string]UnbilledCost{}
	for _, u := range all {
		byRef[u.RemoteRef] = u
	}
	if u := byRef["vt_1"]; u.Vendor != "acme" || u.StepKind != "paid" || u.IdempotencyKey != testKey(paidRef(ep, "video", 0)) ||
		u.Period != "2026-W32" || u.Amount != 250 || u.Currency != "EUR" || u.Pipeline != "weekly" || u.EpisodeID != ep.ID || u.Step != "video" {
		t.Errorf("vt_1 = %+v; want acme's paid step video of %s with its key", u, ep.ID)
	}
	if u := byRef["ct_1"]; u.Vendor != "" || u.StepKind != "paid" {
		t.Errorf("ct_1 = %+v; want the default vendor's paid step", u)
	}
	if u := byRef["old_1"]; u.Vendor != "" || u.StepKind != "" || u.IdempotencyKey != "key-old" || u.Period != "2026-W31" || !u.RecordedAt.Equal(t0) {
		t.Errorf("old_1 = %+v; want no plan, key-old, 2026-W31, recorded at t0", u)
	}
	// The cut-off, and pages.
	if got := unbilledRefs(mustUnbilled(t, l, "acct", t0, "", 0)); !slices.Equal(got, []string{"old_1"}) {
		t.Fatalf("unbilled at t0: %v; want old_1 only (recorded at t0)", got)
	}
	if got := unbilledRefs(mustUnbilled(t, l, "acct", t0.Add(-time.Second), "", 0)); len(got) != 0 {
		t.Fatalf("unbilled before t0: %v; want none", got)
	}
	var paged []string
	for after := ""; ; {
		page := mustUnbilled(t, l, "acct", later, after, 2)
		if len(page) == 0 {
			break
		}
		paged = append(paged, unbilledRefs(page)...)
		after = page[len(page)-1].RemoteRef
	}
	if !slices.Equal(paged, []string{"ct_1", "old_1", "vt_1"}) {
		t.Fatalf("paged by 2: %v", paged)
	}

	// acct's bill charges vt_1 by reference and ct_1 by key (under
	// another reference); a refund names old_1, which is no charge of it.
	mustBillPage(t, l, "acct", "", "c1",
		billLine("l1", "vt_1", "", 250),
		billLine("l2", "vendor-says-ct", testKey(paidRef(ep, "cover", 0)), 250),
		refundLine("l3", "old_1", "key-old", 400))
	// Another account charges old_1: not acct's bill.
	mustBillPage(t, l, "acct-2", "", "c1", billLine("m1", "old_1", "", 400))
	if got := unbilledRefs(mustUnbilled(t, l, "acct", later, "", 0)); !slices.Equal(got, []string{"old_1"}) {
		t.Fatalf("unbilled of acct: %v; want old_1 (only refunded)", got)
	}
	if got := unbilledRefs(mustUnbilled(t, l, "acct-2", later, "", 0)); !slices.Equal(got, []string{"ct_1", "vt_1"}) {
		t.Fatalf("unbilled of acct-2: %v; want ct_1 and vt_1", got)
	}
	// Reported once: an item of another class or account does not count.
	for _, d := range []DriftItem{
		{Account: "acct", Line: allot.DriftLineOfCost("old_1"), Class: allot.DriftAmountDiffers, Detail: "x"},
		{Account: "acct-2", Line: allot.DriftLineOfCost("old_1"), Class: allot.DriftUncharged, Detail: "x"},
	} {
		if _, _, err := l.RecordDrift(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if got := unbilledRefs(mustUnbilled(t, l, "acct", later, "", 0)); !slices.Equal(got, []string{"old_1"}) {
		t.Fatalf("unbilled of acct with unrelated items: %v; want old_1", got)
	}
	if _, _, err := l.RecordDrift(ctx, DriftItem{Account: "acct", Line: allot.DriftLineOfCost("old_1"), Class: allot.DriftUncharged, Detail: "x"}); err != nil {
		t.Fatal(err)
	}
	if got := unbilledRefs(mustUnbilled(t, l, "acct", later, "", 0)); len(got) != 0 {
		t.Fatalf("unbilled of acct after old_1's item: %v; want none", got)
	}
	_, err := l.UnbilledCosts(ctx, "acct", later, "", MaxBillPage+1)
	wantErr(t, "a limit over the bound", err, ErrInvalidInput)
}

// plantDrift records items over two accounts, vendors, pipelines and
// classes; it returns them in ID order.
func plantDrift(t *testing.T, l *Ledger) []DriftItem {
	t.Helper()
	var out []DriftItem
	for i, spec := range []struct {
		account, vendor, pipeline string
		class                     allot.DriftClass
		amount                    int64
		currency                  string
	}{
		{"a1", "acme", "weekly", allot.DriftUncharged, 100, "EUR"},
		{"a1", "acme", "weekly", allot.DriftUncharged, 200, "EUR"},
		{"a1", "acme", "daily", allot.DriftUncharged, 300, "USD"},
		{"a1", "acme", "", allot.DriftUnrecorded, 400, "EUR"},
		{"a2", "zeta", "weekly", allot.DriftUncharged, 500, "EUR"},
		{"a2", "zeta", "weekly", allot.DriftRefunded, 600, "EUR"},
	} {
		d, created, err := l.RecordDrift(ctxT(t), DriftItem{Account: spec.account, Vendor: spec.vendor, Pipeline: spec.pipeline,
			Line: allot.DriftLineOfCost(fmt.Sprintf("ref-%d", i)), Class: spec.class, Amount: spec.amount, Currency: spec.currency, Detail: "planted"})
		if err != nil || !created {
			t.Fatalf("RecordDrift %d: %v, %v", i, created, err)
		}
		out = append(out, d)
	}
	return out
}

func driftIDs(items []DriftItem) []int64 {
	var out []int64
	for _, d := range items {
		out = append(out, d.ID)
	}
	return out
}

func testBillDriftItems(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	all := plantDrift(t, l)
	if _, err := l.AckDrift(ctx, all[1].ID, "alice", "credited on invoice 7"); err != nil {
		t.Fatal(err)
	}
	id := func(is ...int) []int64 {
		var out []int64
		for _, i := range is {
			out = append(out, all[i].ID)
		}
		return out
	}
	for _, tc := range []struct {
		f    DriftFilter
		want []int64
	}{
		{DriftFilter{}, id(0, 1, 2, 3, 4, 5)},
		{DriftFilter{Account: "a1"}, id(0, 1, 2, 3)},
		{DriftFilter{Vendor: "zeta"}, id(4, 5)},
		{DriftFilter{Pipeline: "weekly"}, id(0, 1, 4, 5)},
		{DriftFilter{Class: allot.DriftUncharged}, id(0, 1, 2, 4)},
		{DriftFilter{Unacked: true}, id(0, 2, 3, 4, 5)},
		{DriftFilter{Account: "a1", Class: allot.DriftUncharged, Unacked: true, Pipeline: "weekly"}, id(0)},
		{DriftFilter{AfterID: all[2].ID}, id(3, 4, 5)},
		{DriftFilter{Limit: 2}, id(0, 1)},
		{DriftFilter{Unacked: true, AfterID: all[0].ID, Limit: 2}, id(2, 3)},
		{DriftFilter{Account: "none"}, nil},
	} {
		if got := driftIDs(mustDriftItems(t, l, tc.f)); !slices.Equal(got, tc.want) {
			t.Errorf("DriftItems(%+v) = %v, want %v", tc.f, got, tc.want)
		}
	}
	// Pages of one chase the IDs to the end.
	var paged []int64
	for f := (DriftFilter{Limit: 1}); ; {
		page := mustDriftItems(t, l, f)
		if len(page) == 0 {
			break
		}
		paged = append(paged, page[0].ID)
		f.AfterID = page[0].ID
	}
	if !slices.Equal(paged, driftIDs(all)) {
		t.Fatalf("paged by one: %v, want %v", paged, driftIDs(all))
	}
	got, err := l.DriftItem(ctx, all[3].ID)
	if err != nil || got != all[3] {
		t.Fatalf("DriftItem(%d) = %+v, %v; want %+v", all[3].ID, got, err, all[3])
	}
	for _, f := range []DriftFilter{{Class: "lost"}, {Limit: -1}, {Limit: MaxBillPage + 1}} {
		_, err := l.DriftItems(ctx, f)
		wantErr(t, fmt.Sprintf("DriftItems(%+v)", f), err, ErrInvalidInput)
	}
}

func testBillAckDrift(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	all := plantDrift(t, l)
	id := all[2].ID
	before := dumpBillTables(t, l)
	for _, tc := range []struct{ name, by, reason, part string }{
		{"no reason", "alice", "", "--reason"},
		{"a blank reason", "alice", "  \n", "--reason"},
		{"no one", "", "credited", "--by"},
		{"a reason too long", "alice", strings.Repeat("x", allot.MaxTextLen+1), "--reason"},
		{"a control character", "alice", "credited\x00", "--reason"},
	} {
		_, err := l.AckDrift(ctx, id, tc.by, tc.reason)
		wantErr(t, tc.name, err, ErrInvalidInput, tc.part)
	}
	_, err := l.AckDrift(ctx, 999999, "alice", "credited")
	if allot.ErrorType(err) != allot.DriftNotFound || !strings.Contains(fmt.Sprint(err), "999999") || !strings.Contains(fmt.Sprint(err), allot.DriftListCommand()) {
		t.Fatalf("AckDrift of an unknown item: %v (type %q); want DriftNotFound naming 999999 and %s", err, allot.ErrorType(err), allot.DriftListCommand())
	}
	if _, err := l.DriftItem(ctx, 999999); allot.ErrorType(err) != allot.DriftNotFound {
		t.Fatalf("DriftItem of an unknown item: %v; want DriftNotFound", err)
	}
	mustBillUnchanged(t, l, "refused acknowledgements", before)

	acked, err := l.AckDrift(ctx, id, "alice", "the vendor credited it on invoice 7")
	if err != nil || acked.AckedAt.IsZero() || acked.AckedBy != "alice" || acked.AckReason != "the vendor credited it on invoice 7" {
		t.Fatalf("AckDrift = %+v, %v; want it acknowledged by alice", acked, err)
	}
	if got, _ := l.DriftItem(ctx, id); got != acked {
		t.Fatalf("stored %+v, AckDrift returned %+v", got, acked)
	}
	// Once: again (even the same words) is refused and changes nothing.
	before = dumpBillTables(t, l)
	for _, by := range []string{"alice", "bob"} {
		_, err = l.AckDrift(ctx, id, by, "the vendor credited it on invoice 7")
		if allot.ErrorType(err) != allot.DriftAcknowledged {
			t.Fatalf("AckDrift again by %s: %v (type %q); want DriftAcknowledged", by, err, allot.ErrorType(err))
		}
		for _, part := range []string{"alice", "invoice 7", acked.AckedAt.Format(time.RFC3339)} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("refusal %q does not say %q", err, part)
			}
		}
	}
	mustBillUnchanged(t, l, "a second acknowledgement", before)
	// It stays in the ledger and stops counting.
	if got := driftIDs(mustDriftItems(t, l, DriftFilter{Unacked: true})); slices.Contains(got, id) {
		t.Fatalf("unacknowledged items %v include the acknowledged %d", got, id)
	}
	if got := driftIDs(mustDriftItems(t, l, DriftFilter{})); !slices.Contains(got, id) {
		t.Fatalf("items %v lost the acknowledged %d", got, id)
	}

	// Concurrent acknowledgements: one wins, the others are refused.
	other := all[4].ID
	const n = 5
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = l.AckDrift(ctx, other, fmt.Sprintf("op-%d", i), "seen")
		}()
	}
	close(start)
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case allot.ErrorType(err) != allot.DriftAcknowledged:
			t.Fatalf("concurrent AckDrift: %v; want DriftAcknowledged", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d concurrent acknowledgements succeeded, want 1", wins)
	}
}

func testBillDriftTotals(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	if got, err := l.DriftTotals(ctx); err != nil || len(got) != 0 {
		t.Fatalf("DriftTotals of an empty ledger = %v, %v", got, err)
	}
	all := plantDrift(t, l)
	want := []DriftTotal{
		{Vendor: "acme", Class: allot.DriftUnrecorded, Currency: "EUR", Count: 1, Amount: 400},
		{Vendor: "acme", Class: allot.DriftUncharged, Currency: "EUR", Count: 2, Amount: 300},
		{Vendor: "acme", Class: allot.DriftUncharged, Currency: "USD", Count: 1, Amount: 300},
		{Vendor: "zeta", Class: allot.DriftUncharged, Currency: "EUR", Count: 1, Amount: 500},
		{Vendor: "zeta", Class: allot.DriftRefunded, Currency: "EUR", Count: 1, Amount: 600},
	}
	slices.SortFunc(want, func(a, b DriftTotal) int {
		return strings.Compare(a.Vendor+"\x00"+string(a.Class)+"\x00"+a.Currency, b.Vendor+"\x00"+string(b.Class)+"\x00"+b.Currency)
	})
	if got, err := l.DriftTotals(ctx); err != nil || !slices.Equal(got, want) {
		t.Fatalf("DriftTotals = %+v, %v; want %+v", got, err, want)
	}
	// Acknowledged items stop counting.
	if _, err := l.AckDrift(ctx, all[0].ID, "alice", "credited"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AckDrift(ctx, all[5].ID, "alice", "credited"); err != nil {
		t.Fatal(err)
	}
	want2 := slices.DeleteFunc(slices.Clone(want), func(d DriftTotal) bool { return d.Class == allot.DriftRefunded })
	for i := range want2 {
		if want2[i].Vendor == "acme" && want2[i].Class == allot.DriftUncharged && want2[i].Currency == "EUR" {
			want2[i].Count, want2[i].Amount = 1, 200
		}
	}
	if got, err := l.DriftTotals(ctx); err != nil || !slices.Equal(got, want2) {
		t.Fatalf("DriftTotals after acknowledgements = %+v, %v; want %+v", got, err, want2)
	}
	// Amounts written around the API that no longer sum in 64 bits are
	// refused, not wrapped.
	for _, line := range []string{"huge-1", "huge-2"} {
		rawExec(t, l, `INSERT INTO drift_items (account, vendor, line, class, amount, currency, detail, found_at)
			VALUES ('a9', 'acme', ?, 'refunded', ?, 'EUR', 'x', ?)`, line, int64(math.MaxInt64/2+1), l.d.timeArg(t0))
	}
	if got, err := l.DriftTotals(ctx); !errors.Is(err, allot.ErrAmountOverflow) {
		t.Fatalf("DriftTotals over int64 = %+v, %v; want ErrAmountOverflow", got, err)
	}
}

// testBillQueriesUseIndexes: the reconciler's queries seek their indexes;
// none scans a whole table. The anti-join of UnbilledCosts is checked on
// SQLite only: PostgreSQL plans a join of empty tables by their default
// statistics, which says nothing of its plan with data.
func testBillQueriesUseIndexes(t *testing.T, l *Ledger) {
	type check struct {
		name    string
		query   string
		args    []any
		indexes []string
	}
	var antiJoin []check
	if l.d == sqliteDialect {
		antiJoin = append(antiJoin, check{"UnbilledCosts", unbilledQuery, l.unbilledArgs("acct", t0, "", 10),
			[]string{"bill_lines_by_task_ref", "bill_lines_by_key", "drift_items"}})
	}
	for _, tc := range append([]check{
		{"UnjudgedBillLines", unjudgedQuery, []any{"acct", 0, 10}, []string{"bill_lines_unjudged"}},
		{"EarlierBillCharge by key", earlierByKeyQuery, []any{"acct", "k", 5, false}, []string{"bill_lines_by_key"}},
		{"EarlierBillCharge by reference", earlierByRefQuery, []any{"acct", "r", 5, false}, []string{"bill_lines_by_task_ref"}},
		{"DriftTotals", driftTotalsQuery, nil, []string{"drift_items_unacked_totals"}},
	}, antiJoin...) {
		plan := queryPlan(t, l, l.d.q(tc.query), tc.args...)
		for _, ix := range tc.indexes {
			if !strings.Contains(plan, ix) {
				t.Errorf("%s does not use index %s:\n%s\nplan:\n%s", tc.name, ix, tc.query, plan)
			}
		}
		// SQLite: "SCAN <table>" without an index; PostgreSQL: "Seq Scan".
		for _, line := range strings.Split(plan, "\n") {
			line = strings.TrimSpace(line)
			if strings.Contains(line, "Seq Scan") || strings.HasPrefix(line, "SCAN ") && !strings.Contains(line, "INDEX") {
				t.Errorf("%s scans a table: %q\nplan:\n%s", tc.name, line, plan)
			}
		}
	}
}
