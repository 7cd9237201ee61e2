package ledger

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// Conformance tests of imported costs against budgets (docs/design.md,
// "Imports and check"), registered in runConformance.

// withBudget makes every costed task of r count in budget b (limit in USD
// cents) in the ISO week of r's nominal time.
func withBudget(r ImportRecord, b string, limit int64) ImportRecord {
	for i := range r.Tasks {
		if r.Tasks[i].Currency != "" {
			r.Tasks[i].Budgets = []ImportBudget{{BudgetLimit: BudgetLimit{Budget: b, Currency: "USD", Limit: limit}, Period: r.Period}}
		}
	}
	return r
}

// testImportCountsAgainstBudgets: the reproduction of issue 24. Two old
// runs cost 580 in week 31 (250 + 40 each) under a 750 budget: the import
// settles them in the budget, so a new task reserving 250 more is refused,
// budget list shows them, and the audit finds the entries consistent.
func testImportCountsAgainstBudgets(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	const limit = 750
	b := importBatch("weekly", withBudget(importRecord("weekly", "w31a", w31Mon), "weekly-cap", limit),
		withBudget(importRecord("weekly", "w31b", w31Thu), "weekly-cap", limit))
	dry := b
	dry.DryRun = true
	if res := mustImport(t, l, dry); len(res.OverBudget) != 0 {
		t.Fatalf("dry run: over budget %+v, want none (580 of 750)", res.OverBudget)
	}
	if bp, err := l.BudgetPeriodOf(ctx, BudgetLimit{Budget: "weekly-cap", Currency: "USD", Limit: limit}, "2026-W31"); err != nil || bp.Settled != 0 {
		t.Fatalf("after the dry run: %+v, %v; want nothing settled", bp, err)
	}
	res := mustImport(t, l, b)

	bp, err := l.BudgetPeriodOf(ctx, BudgetLimit{Budget: "weekly-cap", Currency: "USD", Limit: limit}, "2026-W31")
	if err != nil || bp.Settled != 580 || bp.SettledTasks != 4 || bp.Reserved != 0 || bp.Free != 170 || bp.Overrun != 0 {
		t.Fatalf("budget period after the import: %+v, %v; want 580 settled by 4 tasks, 170 free", bp, err)
	}
	entries, err := l.TaskBudgetEntries(ctx, PaidTaskRef{Pipeline: "weekly", EpisodeID: res.Episodes[0].EpisodeID, Step: "video"})
	if err != nil || len(entries) != 1 || entries[0].State != EntrySettled || entries[0].Settled != 250 || entries[0].Reserved != 250 || entries[0].Period != "2026-W31" {
		t.Fatalf("the imported video's entries: %+v, %v; want one settled at 250 in 2026-W31", entries, err)
	}
	// The same import again skips every record and counts nothing twice.
	if again := mustImport(t, l, b); !again.Episodes[0].Skipped || !again.Episodes[1].Skipped {
		t.Fatalf("the import again: %+v, want every record skipped", again.Episodes)
	}
	if bp, err := l.BudgetPeriodOf(ctx, BudgetLimit{Budget: "weekly-cap", Currency: "USD", Limit: limit}, "2026-W31"); err != nil || bp.Settled != 580 {
		t.Fatalf("budget period after the import again: %+v, %v; want 580 settled", bp, err)
	}
	// An effect without a cost counts nowhere.
	if entries, err := l.TaskBudgetEntries(ctx, PaidTaskRef{Pipeline: "weekly", EpisodeID: res.Episodes[0].EpisodeID, Step: "publish"}); err != nil || len(entries) != 0 {
		t.Fatalf("the imported effect's entries: %+v, %v; want none", entries, err)
	}

	// 750 new under the 750 budget: 580 + 250 does not fit.
	ep := alloc(t, l, "weekly", "weekly/new", "2026-W31", 0).Episode
	pt, err := reserve(t, l, PaidTaskRef{Pipeline: "weekly", EpisodeID: ep.ID, Step: "video"}, usd("weekly-cap", "2026-W31", limit, 250))
	be := wantRefused(t, pt, err, "weekly-cap")
	if s := be.Shortfalls[0]; s.Settled != 580 {
		t.Fatalf("the refusal counts %d settled, want the 580 imported", s.Settled)
	}
	mustReserve(t, l, PaidTaskRef{Pipeline: "weekly", EpisodeID: ep.ID, Step: "cover"}, usd("weekly-cap", "2026-W31", limit, 170))

	au, err := l.Audit(ctx, AuditOptions{Pipeline: "weekly", Budgets: []BudgetLimit{{Budget: "weekly-cap", Currency: "USD", Limit: limit}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range au.Violations {
		if strings.HasPrefix(v.Kind, "budget") || strings.HasPrefix(v.Kind, "reservation") || v.Kind == KindCostOverReservation {
			t.Errorf("audit after the import: %v", v)
		}
	}
}

// testImportOverBudget: an import whose costs would take a period over its
// limit (settled + reserved + imported, raises included) is refused, dry or
// not, naming the period, and writes nothing; with a reason and who gives
// it, it is imported, each episode counting in that period records them,
// and the audit reports the period as exceeded.
func testImportOverBudget(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	const limit = 400
	weeklyCap := BudgetLimit{Budget: "weekly-cap", Currency: "USD", Limit: limit}
	// 100 reserved already by a task of the period; a raise to 600: 100 +
	// 580 imported is over it, while 580 alone would not be.
	ep := alloc(t, l, "weekly", "weekly/new", "2026-W31", 0).Episode
	mustReserve(t, l, PaidTaskRef{Pipeline: "weekly", EpisodeID: ep.ID, Step: "video"}, usd("weekly-cap", "2026-W31", limit, 100))
	if _, _, err := l.RaiseBudget(ctx, BudgetRaise{RequestID: "raise-1", Budget: "weekly-cap", Period: "2026-W31", Limit: 600, Currency: "USD", Reason: "launch", By: "maria"}); err != nil {
		t.Fatal(err)
	}
	b := importBatch("weekly", withBudget(importRecord("weekly", "w31a", w31Mon), "weekly-cap", limit),
		withBudget(importRecord("weekly", "w31b", w31Thu), "weekly-cap", limit),
		withBudget(importRecord("weekly", "w32a", w32Mon), "weekly-cap", limit))
	for _, dry := range []bool{true, false} {
		b.DryRun = dry
		res, err := l.Import(ctx, b)
		if got := conflictKinds(t, err); !slices.Equal(got, []string{"over_budget "}) {
			t.Fatalf("dry %v: conflicts %v, want one over_budget", dry, got)
		}
		want := ImportOverBudget{Budget: "weekly-cap", Period: "2026-W31", Currency: "USD", Limit: 600, Raised: true, Settled: 0, Reserved: 100, Imported: 580, OldIDs: []string{"w31a", "w31b"}}
		if dry && (len(res.OverBudget) != 1 || !slices.Equal(res.OverBudget[0].OldIDs, want.OldIDs) || res.OverBudget[0].String() != want.String() || !res.OverBudget[0].Raised) {
			t.Fatalf("dry %v: over budget %+v, want %+v", dry, res.OverBudget, want)
		}
		for _, s := range []string{"2026-W31", "--over-budget", "starter budget raise weekly-cap --period 2026-W31 --limit 680"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("dry %v: the refusal does not say %q: %v", dry, s, err)
			}
		}
	}
	if metas, err := l.Imports(ctx, "weekly"); err != nil || len(metas) != 0 {
		t.Fatalf("after the refusals: imports %+v, %v; want none", metas, err)
	}
	if bp, err := l.BudgetPeriodOf(ctx, weeklyCap, "2026-W31"); err != nil || bp.Settled != 0 || bp.Reserved != 100 {
		t.Fatalf("after the refusals: %+v, %v; want only the 100 reserved", bp, err)
	}

	b.OverBudgetReason = "the old system paid these"
	if _, err := l.Import(ctx, b); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("over budget without who allows it: %v, want ErrInvalidInput", err)
	}
	b.OverBudgetBy = "maria"
	res := mustImport(t, l, b)
	for _, e := range res.Episodes {
		if e.OverBudget != (e.OldID != "w32a") {
			t.Errorf("%s: over budget %v", e.OldID, e.OverBudget)
		}
	}
	metas, err := l.Imports(ctx, "weekly")
	if err != nil || len(metas) != 3 {
		t.Fatalf("imports %+v, %v", metas, err)
	}
	for _, m := range metas {
		want := [2]string{"maria", "the old system paid these"}
		if m.OldID == "w32a" {
			want = [2]string{}
		}
		if got := [2]string{m.OverBudgetBy, m.OverBudgetReason}; got != want {
			t.Errorf("import of %s records %q, want %q", m.OldID, got, want)
		}
	}
	if bp, err := l.BudgetPeriodOf(ctx, weeklyCap, "2026-W31"); err != nil || bp.Settled != 580 || bp.Reserved != 100 || bp.Limit != 600 {
		t.Fatalf("after the import: %+v, %v; want 580 settled and 100 reserved of 600", bp, err)
	}
	if bp, err := l.BudgetPeriodOf(ctx, weeklyCap, "2026-W32"); err != nil || bp.Settled != 290 {
		t.Fatalf("week 32 after the import: %+v, %v; want 290 settled", bp, err)
	}
	// Week 31 has 580 settled of 600: once the reserved task's cost is
	// recorded, 680 are, and check says so.
	if _, err := l.RecordSubmission(ctx, Submission{PaidTaskRef: PaidTaskRef{Pipeline: "weekly", EpisodeID: ep.ID, Step: "video"},
		RemoteRef: "vt_new_video", Amount: 100, Currency: "USD"}); err != nil {
		t.Fatal(err)
	}
	au, err := l.Audit(ctx, AuditOptions{Pipeline: "weekly", Budgets: []BudgetLimit{weeklyCap}})
	if err != nil {
		t.Fatal(err)
	}
	var exceeded []string
	for _, v := range au.Violations {
		if v.Kind == KindBudgetExceeded {
			exceeded = append(exceeded, v.Detail)
		}
	}
	if len(exceeded) != 1 || !strings.Contains(exceeded[0], "period 2026-W31 has 6.80 USD settled") {
		t.Fatalf("budget_exceeded: %q, want week 31's 680 over 600", exceeded)
	}
}

// testImportCurrencyAgainstBudget: a cost in another currency than a
// budget that covers its step, or in no ISO 4217 code, is refused and
// nothing is written.
func testImportCurrencyAgainstBudget(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	eur := withBudget(importRecord("weekly", "w31a", w31Mon), "weekly-cap", 750)
	eur.Tasks[0].Currency = "EUR"
	bad := importRecord("weekly", "w31b", w31Thu)
	bad.Tasks[0].Currency = "usd"
	for _, r := range []ImportRecord{eur, bad} {
		for _, dry := range []bool{true, false} {
			b := importBatch("weekly", r)
			b.DryRun = dry
			if _, err := l.Import(ctx, b); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), r.Tasks[0].RemoteRef) {
				t.Fatalf("%s dry %v: %v, want ErrInvalidInput naming %s", r.OldID, dry, err, r.Tasks[0].RemoteRef)
			}
		}
	}
	if metas, err := l.Imports(ctx, "weekly"); err != nil || len(metas) != 0 {
		t.Fatalf("imports %+v, %v; want none", metas, err)
	}
	if entries, err := l.BudgetEntries(ctx, "weekly-cap", ""); err != nil || len(entries) != 0 {
		t.Fatalf("budget entries %+v, %v; want none", entries, err)
	}
}
