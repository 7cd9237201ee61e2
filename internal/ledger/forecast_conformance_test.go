package ledger

import (
	"strings"
	"testing"
	"time"

	"allot"
)

// testForecastCounts: a period's episodes are counted; of a budget
// period's, only those that neither settled nor hold a paid task count as
// still to reserve, by nominal time in [from, to).
func testForecastCounts(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	at := func(key string, nominal time.Time) Episode {
		res, err := l.Allocate(ctx, AllocateInput{Pipeline: "weekly", Key: key, Period: "2026-W32", NominalTime: nominal})
		if err != nil {
			t.Fatal(err)
		}
		return res.Episode
	}
	at("weekly/a", t0)
	paid := at("weekly/b", t0.Add(time.Hour))
	mustIntent(t, l, paidRef(paid, "video", 0))
	done := at("weekly/c", t0.Add(2*time.Hour))
	if _, err := l.CompleteEpisode(ctx, "weekly", done.ID, t0); err != nil {
		t.Fatal(err)
	}
	rejected := at("weekly/d", t0.Add(3*time.Hour))
	if err := l.RecordEpisodeOutcome(ctx, "weekly", rejected.ID, allot.OutcomeRejected, allot.ReasonApprovalRejected, t0); err != nil {
		t.Fatal(err)
	}
	at("weekly/e", t0.Add(7*24*time.Hour)) // the next week: outside
	if n, err := l.EpisodeCount(ctx, "weekly", "2026-W32"); err != nil || n != 5 {
		t.Fatalf("EpisodeCount = %d, %v; want 5 (the period is the allocation's, not the nominal time's)", n, err)
	}
	n, err := l.UnreservedEpisodes(ctx, "weekly", t0, t0.Add(7*24*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("UnreservedEpisodes = %d, %v; want 1 (only the fresh one)", n, err)
	}
	if n, err := l.UnreservedEpisodes(ctx, "weekly", t0.Add(time.Second), t0.Add(7*24*time.Hour)); err != nil || n != 0 {
		t.Fatalf("UnreservedEpisodes after its nominal time = %d, %v; want 0", n, err)
	}
	// The plan on SQLite only: PostgreSQL plans the anti-join of small
	// tables by default statistics, which say nothing of its plan with data.
	if l.d == sqliteDialect {
		plan := queryPlan(t, l, l.d.q(unreservedQuery), l.unreservedArgs("weekly", t0, t0)...)
		if !strings.Contains(plan, "episodes_by_nominal") {
			t.Errorf("UnreservedEpisodes does not use episodes_by_nominal:\n%s", plan)
		}
	}
}
