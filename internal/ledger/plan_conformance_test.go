package ledger

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"allot"
)

// Conformance tests for the step plan pinned per episode (invariant 14) and
// for the v4 migration that added it with the paid-task owner columns;
// registered in runConformance so that both drivers run them.

func testEpisodePlan(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	if plan, err := l.EpisodePlan(ctxT(t), "weekly", ep.ID); err != nil || plan != "" {
		t.Fatalf("plan of a new episode = %q, %v; want none", plan, err)
	}
	p1 := `{"steps":[{"name":"render","kind":"paid","params":{"model":"a"}}]}`
	p2 := `{"steps":[{"name":"render","kind":"paid","params":{"model":"b"}}]}`
	if got, err := l.PinPlan(ctxT(t), "weekly", ep.ID, p1); err != nil || got != p1 {
		t.Fatalf("PinPlan = %q, %v; want %q", got, err, p1)
	}
	if got, err := l.EpisodePlan(ctxT(t), "weekly", ep.ID); err != nil || got != p1 {
		t.Fatalf("EpisodePlan = %q, %v; want %q", got, err, p1)
	}
	// The pipeline changed since: the episode keeps the plan it was pinned
	// with, and pinning tells the caller which one that is.
	before := dumpTables(t, l)
	for _, p := range []string{p2, p1} {
		if got, err := l.PinPlan(ctxT(t), "weekly", ep.ID, p); err != nil || got != p1 {
			t.Fatalf("PinPlan(%q) over a pinned plan = %q, %v; want %q", p, got, err, p1)
		}
	}
	mustBeUnchanged(t, l, "pinning over a pinned plan", before)
	_, err := l.PinPlan(ctxT(t), "weekly", ep.ID, "")
	wantErr(t, "PinPlan of an empty plan", err, ErrInvalidInput, ep.ID)
	_, err = l.PinPlan(ctxT(t), "weekly", "2026-W32-9", p1)
	wantErr(t, "PinPlan of a missing episode", err, ErrEpisodeNotFound, "2026-W32-9")
	_, err = l.PinPlan(ctxT(t), "daily", ep.ID, p1)
	wantErr(t, "PinPlan in another pipeline", err, ErrEpisodeNotFound, `"daily"`)
	_, err = l.EpisodePlan(ctxT(t), "weekly", "2026-W32-9")
	wantErr(t, "EpisodePlan of a missing episode", err, ErrEpisodeNotFound, "2026-W32-9")
	_, err = l.EpisodePlan(ctxT(t), "weekly", "")
	wantErr(t, "EpisodePlan without an episode ID", err, ErrEpisodeNotFound)
	_, err = l.PinPlan(ctxT(t), "", ep.ID, p1)
	wantErr(t, "PinPlan without a pipeline", err, ErrInvalidInput)
	mustBeUnchanged(t, l, "refused plan calls", before)
	// The plan is not part of the episode's identity.
	if got := mustEpisode(t, l, "weekly", ep.ID); got != ep {
		t.Fatalf("pinning changed the episode: %+v, want %+v", got, ep)
	}

	// Each episode has its own; concurrent first pins agree on one.
	ep2 := alloc(t, l, "weekly", "k2", "2026-W32", 0).Episode
	const n = 8
	got := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			got[i], errs[i] = l.PinPlan(ctxT(t), "weekly", ep2.ID, fmt.Sprintf(`{"v":%d}`, i))
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || got[i] != got[0] {
			t.Fatalf("pin %d = %q, %v; pin 0 = %q", i, got[i], errs[i], got[0])
		}
	}
	if stored, err := l.EpisodePlan(ctxT(t), "weekly", ep2.ID); err != nil || stored != got[0] || !strings.HasPrefix(stored, `{"v":`) {
		t.Fatalf("pinned plan %q, %v; callers got %q", stored, err, got[0])
	}
	if stored, _ := l.EpisodePlan(ctxT(t), "weekly", ep.ID); stored != p1 {
		t.Fatalf("the first episode's plan changed to %q", stored)
	}
}

// testMigrateV3ToV4 builds a ledger as the v3 build left it, with paid
// tasks in every state, and checks that migrating it keeps them, marks the
// intents as possibly sent (an earlier build may have sent them) and starts
// every episode without a pinned plan.
func testMigrateV3ToV4(t *testing.T, url string) {
	ctx := ctxT(t)
	v3 := ledgerAtVersion(t, url, 3)
	rawInsertEpisode(t, v3, "weekly", "2026-W32-0", "2026-W32", 0, "k0")
	ep := Episode{Pipeline: "weekly", ID: "2026-W32-0", Period: "2026-W32", Sequence: 0, AllocationKey: "k0", NominalTime: t0, CreatedAt: t0, Status: EpisodeAllocated}
	tasks := []struct {
		step   string
		state  allot.PaidTaskState
		remote string
	}{
		{"render", allot.PaidIntent, ""},
		{"voice", allot.PaidPlanned, ""},
		{"music", allot.PaidSubmitted, "vr-music"},
		{"title", allot.PaidSucceeded, "vr-title"},
		{"cover", allot.PaidFailed, "vr-cover"},
		{"extra", allot.PaidAbandoned, ""},
	}
	for _, tk := range tasks {
		r := paidRef(ep, tk.step, 0)
		key := testKey(r)
		if tk.state == allot.PaidPlanned {
			key = ""
		}
		rawInsertPaidTask(t, v3, r, key, string(tk.state), tk.remote)
		if tk.remote != "" {
			rawInsertCost(t, v3, tk.remote, r, 10)
		}
	}
	rawExec(t, v3, `INSERT INTO operator_decisions (request_id, pipeline, episode_id, step, revision, action, remote_ref, reason, decided_at)
		VALUES ('u-1', 'weekly', ?, 'extra', 0, 'abandon', '', 'gave up', ?)`, ep.ID, v3.d.timeArg(t0))
	for _, q := range []string{`SELECT owner FROM paid_tasks`, `SELECT maybe_sent FROM paid_tasks`, `SELECT sending_until FROM paid_tasks`, `SELECT plan FROM episodes`} {
		if _, err := v3.w.ExecContext(ctx, q); err == nil {
			t.Fatalf("a v3 ledger already answers %q", q)
		}
	}
	if err := v3.Close(); err != nil {
		t.Fatal(err)
	}

	ro, err := OpenReadOnly(ctx, url)
	if err == nil {
		_ = ro.Close()
		t.Fatal("OpenReadOnly accepted a v3 ledger")
	}
	if !strings.Contains(err.Error(), "schema version 3") {
		t.Errorf("OpenReadOnly(v3) = %v, want it to name the old version", err)
	}

	l := openURLT(t, url)
	mustBeAtLatestVersion(t, l)
	if got := mustEpisode(t, l, "weekly", ep.ID); got != ep {
		t.Fatalf("episode after migration = %+v, want %+v", got, ep)
	}
	for _, tk := range tasks {
		pt := mustPaidTask(t, l, paidRef(ep, tk.step, 0))
		intent := tk.state == allot.PaidIntent
		if pt.State != tk.state || pt.RemoteRef != tk.remote || pt.Owner != "" || pt.ResubmitRequest != "" || !pt.SendingUntil.IsZero() ||
			pt.MaybeSent != intent || pt.OutcomeUnknown() != intent {
			t.Errorf("%s after migration: %+v; want %s with MaybeSent %v and no owner", tk.step, pt, tk.state, intent)
		}
	}
	if cs := mustCosts(t, l, "weekly", ""); len(cs) != 3 || costTotal(cs) != 30 {
		t.Fatalf("costs after migration: %+v", cs)
	}
	if ds, err := l.Decisions(ctx, "weekly", ep.ID); err != nil || len(ds) != 1 || ds[0].RequestID != "u-1" || ds[0].Action != allot.ActionAbandon {
		t.Fatalf("decisions after migration = %+v, %v", ds, err)
	}
	if plan, err := l.EpisodePlan(ctx, "weekly", ep.ID); err != nil || plan != "" {
		t.Fatalf("plan of an episode allocated before v4 = %q, %v; want none", plan, err)
	}
	// An old episode pins the plan its first load sees.
	if plan, err := l.PinPlan(ctx, "weekly", ep.ID, `{"steps":[]}`); err != nil || plan != `{"steps":[]}` {
		t.Fatalf("PinPlan on an old episode = %q, %v", plan, err)
	}
	if r := alloc(t, l, "weekly", "k1", "2026-W32", 0); r.Episode.ID != "2026-W32-1" {
		t.Fatalf("allocation after migration: %+v", r)
	} else if plan, err := l.EpisodePlan(ctx, "weekly", r.Episode.ID); err != nil || plan != "" {
		t.Fatalf("plan of a new episode = %q, %v", plan, err)
	}

	// The old intent has no owner: the next attempt finds it owned by
	// nobody it knows, asks the vendor, and takes it over from "".
	r := paidRef(ep, "render", 0)
	old := mustIntentBy(t, l, r, "attempt-new")
	if old.Owner != "" || !old.OutcomeUnknown() {
		t.Fatalf("WriteIntent on the migrated intent = %+v, want it unchanged", old)
	}
	_, err = l.MarkSending(ctx, r, "attempt-new", sendUntil)
	wantErr(t, "MarkSending of the migrated intent before taking it over", err, ErrIntentOwned)
	// It has no send deadline: once the vendor said it has nothing, it is
	// taken over at once.
	taken, err := l.TakeIntent(ctx, old, "attempt-new", t0)
	if err != nil || taken.Owner != "attempt-new" || !taken.MaybeSent || !taken.SendingUntil.IsZero() {
		t.Fatalf("TakeIntent of the migrated intent = %+v, %v", taken, err)
	}
	mustSubmit(t, l, r, "vr-render", 12)
	// The migrated planned task becomes an intent that was never sent.
	if in := mustIntentBy(t, l, paidRef(ep, "voice", 0), "attempt-v"); in.State != allot.PaidIntent || in.MaybeSent || in.Owner != "attempt-v" {
		t.Fatalf("intent of the migrated planned task: %+v", in)
	}
	if _, err := l.RecordSubmission(ctx, Submission{PaidTaskRef: paidRef(ep, "extra", 0), RemoteRef: "vr-x", Amount: 1, Currency: "EUR"}); !errors.Is(err, ErrPaidTaskState) {
		t.Fatalf("RecordSubmission on the migrated abandoned task: %v", err)
	}
	mustCheckClean(t, l, "")
	// Opening again applies nothing more.
	mustBeAtLatestVersion(t, openURLT(t, url))
}
