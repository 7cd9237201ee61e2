package ledger

import (
	"slices"
	"testing"
	"time"

	"allot"
)

// Migration 0017 (the vendor's bill and drift items): a v16 ledger holding
// episodes, paid tasks and costs gains the empty bill tables, and its old
// costs are what its bill must charge.

func TestSQLiteMigrateV16ToV17Bill(t *testing.T) { testMigrateV16ToV17(t, newSQLiteURL(t)) }

func TestPostgresMigrateV16ToV17Bill(t *testing.T) {
	postgresDSN(t)
	testMigrateV16ToV17(t, newPostgresURL(t))
}

func testMigrateV16ToV17(t *testing.T, url string) {
	v16 := ledgerAtVersion(t, url, 16)
	rawInsertEpisode(t, v16, "weekly", "2026-W32-0", "2026-W32", 0, "weekly/k")
	rawExec(t, v16, `UPDATE episodes SET plan = ? WHERE pipeline = 'weekly'`, billPlan)
	ref := PaidTaskRef{Pipeline: "weekly", EpisodeID: "2026-W32-0", Step: "video"}
	rawInsertPaidTask(t, v16, ref, "key-old", string(allot.PaidSucceeded), "vt_old")
	rawInsertCost(t, v16, "vt_old", ref, 250)
	if err := v16.Close(); err != nil {
		t.Fatal(err)
	}
	l := openURLT(t, url)
	mustBeAtLatestVersion(t, l)
	ctx := ctxT(t)
	if w, err := l.BillWatermark(ctx, "acct"); err != nil || w != (BillWatermark{}) {
		t.Fatalf("watermark after 0017 = %+v, %v; want none", w, err)
	}
	later := time.Now().Add(time.Hour)
	us := mustUnbilled(t, l, "acct", later, "", 0)
	if len(us) != 1 || us[0].RemoteRef != "vt_old" || us[0].IdempotencyKey != "key-old" || us[0].Vendor != "acme" || us[0].Amount != 250 {
		t.Fatalf("unbilled after 0017: %+v; want the old cost vt_old of acme", us)
	}
	mustBillPage(t, l, "acct", "", "c1", billLine("l1", "vt_old", "key-old", 250), billLine("l2", "vt_phantom", "", 99))
	if got := unbilledRefs(mustUnbilled(t, l, "acct", later, "", 0)); len(got) != 0 {
		t.Fatalf("unbilled once the bill charges it: %v", got)
	}
	if rec, err := l.JudgeBillLine(ctx, "acct", "l2", driftOfClass(allot.DriftUnrecorded)); err != nil || !rec {
		t.Fatalf("JudgeBillLine after 0017 = %v, %v", rec, err)
	}
	if got := billLineIDs(mustUnjudged(t, l, "acct", 0, 0)); !slices.Equal(got, []string{"l1"}) {
		t.Fatalf("unjudged after 0017: %v; want l1", got)
	}
	totals, err := l.DriftTotals(ctx)
	if err != nil || len(totals) != 1 || totals[0].Count != 1 || totals[0].Class != allot.DriftUnrecorded {
		t.Fatalf("DriftTotals after 0017 = %+v, %v", totals, err)
	}
}
