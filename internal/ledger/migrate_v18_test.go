package ledger

import (
	"testing"

	"allot"
)

// Migration 0018 (period deadlines): a v17 ledger holding a completed
// episode and run outcomes gains the empty deadline tables; its old
// periods are counted by a judgement and its old runs found by period.

func TestSQLiteMigrateV17ToV18Deadlines(t *testing.T) { testMigrateV17ToV18(t, newSQLiteURL(t)) }

func TestPostgresMigrateV17ToV18Deadlines(t *testing.T) {
	postgresDSN(t)
	testMigrateV17ToV18(t, newPostgresURL(t))
}

func testMigrateV17ToV18(t *testing.T, url string) {
	v17 := ledgerAtVersion(t, url, 17)
	rawInsertEpisode(t, v17, "weekly", "2026-W32-0", "2026-W32", 0, "weekly/k")
	rawExec(t, v17, `UPDATE episodes SET status = 'completed', completed_at = ? WHERE pipeline = 'weekly'`, v17.d.timeArg(t0))
	rawExec(t, v17, `INSERT INTO run_outcomes (pipeline, allocation_key, run_id, nominal_time, nominal_time_source, outcome, reason, episode_id, period, sequence, recorded_at)
		VALUES ('weekly', 'weekly/skipped', 'catch-up', ?, 'schedule', 'skipped', 'missed_catch_up', '', '2026-W33', -1, ?)`, v17.d.timeArg(t0), v17.d.timeArg(t0))
	if err := v17.Close(); err != nil {
		t.Fatal(err)
	}
	l := openURLT(t, url)
	mustBeAtLatestVersion(t, l)
	ctx := ctxT(t)
	if _, found, err := l.DeadlineDeclaration(ctx, "weekly"); err != nil || found {
		t.Fatalf("a declaration after 0018: %v, %v", found, err)
	}
	if rec, recorded, _ := mustJudge(t, l, judgement(allot.DeadlineLate, 1)); !recorded || rec.Kind != allot.DeadlineOnTime {
		t.Fatalf("the old completed episode's period = %+v; want on_time", rec)
	}
	runs, err := l.RunOutcomesOfPeriod(ctx, "weekly", "2026-W33")
	if err != nil || len(runs) != 1 || runs[0].Reason != allot.ReasonMissedCatchUp || !runs[0].NominalTime.Equal(t0) {
		t.Fatalf("the old skipped run of W33 = %+v, %v", runs, err)
	}
	if last, err := l.LastJudgedDue(ctx, "weekly"); err != nil || !last.Equal(due) {
		t.Fatalf("LastJudgedDue after 0018 = %s, %v", last, err)
	}
}
