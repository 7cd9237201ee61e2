package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"allot"
)

// The run that allocated an episode gets its own answer back when it asks
// again (its reply was lost); every other run of the key is reused.
func testAllocatingRunGetsItsAnswer(t *testing.T, l *Ledger) {
	in := AllocateInput{Pipeline: "weekly", Key: "k", Period: "2026-W32", NominalTime: t0, RunID: "run-1"}
	first, err := l.Allocate(ctxT(t), in)
	if err != nil || first.Decision != DecisionAllocated || first.Episode.AllocatedByRun != "run-1" {
		t.Fatalf("first allocation: %+v, %v", first, err)
	}
	again, err := l.Allocate(ctxT(t), in)
	if err != nil || again.Decision != DecisionAllocated || again.Reason != ReasonNewEpisode || again.Episode.ID != first.Episode.ID {
		t.Fatalf("the allocating run again: %s/%s %s, %v; want allocated/new_episode %s", again.Decision, again.Reason, again.Episode.ID, err, first.Episode.ID)
	}
	in.RunID = "run-2"
	other, err := l.Allocate(ctxT(t), in)
	if err != nil || other.Decision != DecisionReused || other.Reason != ReasonKeyBound || other.Episode.ID != first.Episode.ID {
		t.Fatalf("another run of the key: %s/%s %s, %v; want reused/key_bound", other.Decision, other.Reason, other.Episode.ID, err)
	}
	in.RunID = ""
	if anon, err := l.Allocate(ctxT(t), in); err != nil || anon.Decision != DecisionReused {
		t.Fatalf("a run without an ID: %s, %v; want reused", anon.Decision, err)
	}
}

func addInput(t *testing.T, l *Ledger, pipeline, ref string, readyAt time.Time, payload string) AddInputResult {
	t.Helper()
	res, err := l.AddInput(ctxT(t), Input{Pipeline: pipeline, Ref: ref, ReadyAt: readyAt, Payload: json.RawMessage(payload)})
	if err != nil {
		t.Fatalf("AddInput(%s, %s): %v", pipeline, ref, err)
	}
	return res
}

// Adding is idempotent on the reference; other data under it is refused
// and writes nothing; withdrawing works only before a claim.
func testInputsAddWithdraw(t *testing.T, l *Ledger) {
	ready := t0.Add(-time.Hour)
	if res := addInput(t, l, "drafts", "d-1", ready, `{"title": "One"}`); !res.Added || res.Input.State != InputReady || string(res.Input.Payload) != `{"title":"One"}` {
		t.Fatalf("first add: %+v", res)
	}
	if res := addInput(t, l, "drafts", "d-1", ready, `{ "title":"One" }`); res.Added {
		t.Fatalf("the same input again was added anew: %+v", res)
	}
	for name, in := range map[string]Input{
		"other payload":    {Pipeline: "drafts", Ref: "d-1", ReadyAt: ready, Payload: json.RawMessage(`{"title":"Two"}`)},
		"other ready time": {Pipeline: "drafts", Ref: "d-1", ReadyAt: ready.Add(time.Minute), Payload: json.RawMessage(`{"title":"One"}`)},
	} {
		if _, err := l.AddInput(ctxT(t), in); !errors.Is(err, ErrInputConflict) {
			t.Errorf("%s: %v, want ErrInputConflict", name, err)
		}
	}
	for name, in := range map[string]Input{
		"no reference": {Pipeline: "drafts", Ref: "  "},
		"bad JSON":     {Pipeline: "drafts", Ref: "d-9", Payload: json.RawMessage(`{title}`)},
		"huge payload": {Pipeline: "drafts", Ref: "d-9", Payload: json.RawMessage(`"` + string(make([]byte, MaxInputPayload)) + `"`)},
		"no pipeline":  {Ref: "d-9"},
	} {
		if _, err := l.AddInput(ctxT(t), in); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%s: %v, want ErrInvalidInput", name, err)
		}
	}
	if all, err := l.Inputs(ctxT(t), "drafts", ""); err != nil || len(all) != 1 || all[0].Payload == nil {
		t.Fatalf("after refused adds: %+v, %v", all, err)
	}

	addInput(t, l, "drafts", "d-2", ready, "")
	w, err := l.WithdrawInput(ctxT(t), "drafts", "d-2")
	if err != nil || w.State != InputWithdrawn || w.WithdrawnAt.IsZero() {
		t.Fatalf("withdraw: %+v, %v", w, err)
	}
	if w, err := l.WithdrawInput(ctxT(t), "drafts", "d-2"); err != nil || w.State != InputWithdrawn {
		t.Fatalf("withdraw again: %+v, %v", w, err)
	}
	if _, err := l.WithdrawInput(ctxT(t), "drafts", "nosuch"); !errors.Is(err, ErrInputNotFound) {
		t.Fatalf("withdraw of an unknown input: %v", err)
	}
	res, err := l.Allocate(ctxT(t), AllocateInput{Pipeline: "drafts", Key: "k1", Period: "2026-W32", NominalTime: t0, ClaimInput: true})
	if err != nil || res.Input == nil || res.Input.Ref != "d-1" {
		t.Fatalf("allocation claimed %+v, %v; want d-1 (d-2 is withdrawn)", res.Input, err)
	}
	if _, err := l.WithdrawInput(ctxT(t), "drafts", "d-1"); !errors.Is(err, ErrInputClaimed) {
		t.Fatalf("withdraw of a claimed input: %v, want ErrInputClaimed", err)
	}
	if got, _ := l.Inputs(ctxT(t), "drafts", InputClaimed); len(got) != 1 || got[0].EpisodeID != res.Episode.ID {
		t.Fatalf("claimed inputs %+v, want d-1 by %s", got, res.Episode.ID)
	}
}

// Allocation claims the oldest input ready by the run's nominal time, in
// its transaction; none ready skips with no_ready_input; the cap comes
// first; a retried key gets its episode and the same input back.
func testInputsClaim(t *testing.T, l *Ledger) {
	allocate := func(key string, nominal time.Time, capN int) AllocateResult {
		t.Helper()
		res, err := l.Allocate(ctxT(t), AllocateInput{Pipeline: "drafts", Key: key, Period: "2026-08-03", NominalTime: nominal, MaxPerPeriod: capN, ClaimInput: true})
		if err != nil {
			t.Fatalf("allocate %s: %v", key, err)
		}
		return res
	}
	if res := allocate("k0", t0, 0); res.Decision != DecisionSkipped || res.Reason != ReasonNoReadyInput {
		t.Fatalf("no inputs: %s/%s, want skipped/no_ready_input", res.Decision, res.Reason)
	}
	if eps, _ := l.ListEpisodes(ctxT(t), "drafts", ""); len(eps) != 0 {
		t.Fatalf("a skipped run left episodes %+v", eps)
	}
	addInput(t, l, "drafts", "later", t0.Add(time.Hour), "")
	addInput(t, l, "drafts", "b", t0.Add(-time.Hour), `{"n":2}`)
	addInput(t, l, "drafts", "a", t0.Add(-time.Hour), `{"n":1}`)
	addInput(t, l, "drafts", "oldest", t0.Add(-2*time.Hour), "")
	for i, want := range []string{"oldest", "a", "b"} {
		res := allocate(fmt.Sprintf("k%d", i+1), t0, 0)
		if res.Decision != DecisionAllocated || res.Input == nil || res.Input.Ref != want || res.Input.EpisodeID != res.Episode.ID {
			t.Fatalf("allocation %d claimed %+v (%s), want %s", i+1, res.Input, res.Decision, want)
		}
	}
	if res := allocate("k4", t0, 0); res.Decision != DecisionSkipped || res.Reason != ReasonNoReadyInput {
		t.Fatalf("only a later input: %s/%s, want skipped/no_ready_input (ready by the nominal time)", res.Decision, res.Reason)
	}
	if res := allocate("k4", t0.Add(2*time.Hour), 0); res.Input == nil || res.Input.Ref != "later" {
		t.Fatalf("a run planned after it is ready: %+v", res.Input)
	}
	again := allocate("k2", t0, 0)
	if again.Decision != DecisionReused || again.Input == nil || again.Input.Ref != "a" {
		t.Fatalf("a retried key: %s with %+v, want reused with input a", again.Decision, again.Input)
	}
	addInput(t, l, "drafts", "c", t0.Add(-time.Hour), "")
	if res := allocate("k5", t0, 4); res.Decision != DecisionSkipped || res.Reason != ReasonCapReached {
		t.Fatalf("at the cap with an input ready: %s/%s, want skipped/cap_reached first", res.Decision, res.Reason)
	}
	if got, _ := l.Inputs(ctxT(t), "drafts", InputReady); len(got) != 1 || got[0].Ref != "c" {
		t.Fatalf("a capped run claimed: ready inputs %+v", got)
	}
	if in, err := l.EpisodeInput(ctxT(t), "drafts", again.Episode.ID); err != nil || in == nil || in.Ref != "a" || string(in.Payload) != `{"n":1}` {
		t.Fatalf("EpisodeInput: %+v, %v", in, err)
	}
}

// Concurrent runs never claim one input twice, and every input is claimed
// by exactly one episode.
func testInputsConcurrentClaims(t *testing.T, l *Ledger) {
	const inputs, runs = 20, 40
	for i := range inputs {
		addInput(t, l, "drafts", fmt.Sprintf("d-%02d", i), t0.Add(-time.Duration(i)*time.Minute), "")
	}
	var wg sync.WaitGroup
	results := make([]AllocateResult, runs)
	errs := make([]error, runs)
	start := make(chan struct{})
	for i := range runs {
		wg.Go(func() {
			<-start
			// Half the runs are duplicates of another's key.
			results[i], errs[i] = l.Allocate(ctxT(t), AllocateInput{Pipeline: "drafts", Key: fmt.Sprintf("k%02d", i%30), Period: "2026-08-03", NominalTime: t0, ClaimInput: true})
		})
	}
	close(start)
	wg.Wait()
	byEpisode := map[string]string{}
	claimedBy := map[string]string{}
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		if r.Input == nil {
			continue
		}
		if prev, ok := byEpisode[r.Episode.ID]; ok && prev != r.Input.Ref {
			t.Fatalf("episode %s got inputs %s and %s", r.Episode.ID, prev, r.Input.Ref)
		}
		if prev, ok := claimedBy[r.Input.Ref]; ok && prev != r.Episode.ID {
			t.Fatalf("input %s claimed by episodes %s and %s", r.Input.Ref, prev, r.Episode.ID)
		}
		byEpisode[r.Episode.ID], claimedBy[r.Input.Ref] = r.Input.Ref, r.Episode.ID
	}
	if len(claimedBy) != inputs {
		t.Fatalf("%d inputs claimed, want all %d", len(claimedBy), inputs)
	}
	claimed, err := l.Inputs(ctxT(t), "drafts", InputClaimed)
	if err != nil || len(claimed) != inputs {
		t.Fatalf("claimed in the ledger: %d, %v", len(claimed), err)
	}
	for _, in := range claimed {
		if claimedBy[in.Ref] != in.EpisodeID {
			t.Fatalf("ledger says %s is %s's, the runs said %s's", in.Ref, in.EpisodeID, claimedBy[in.Ref])
		}
	}
}

// v8 -> v9: outcomes reported without a reason get their stage's reason.
func testMigrateV8ToV9(t *testing.T, url string) {
	v8 := ledgerAtVersion(t, url, 8)
	for i, outcome := range []string{"running", "waiting_approval", "completed", "rejected", "needs_attention", ""} {
		id := fmt.Sprintf("2026-W32-%d", i)
		rawInsertEpisode(t, v8, "weekly", id, "2026-W32", i, "k"+id)
		reason := ""
		if outcome == "needs_attention" {
			reason = "OutcomeUnknown"
		}
		rawExec(t, v8, `UPDATE episodes SET outcome = ?, outcome_reason = ? WHERE episode_id = ?`, outcome, reason, id)
	}
	if err := v8.Close(); err != nil {
		t.Fatal(err)
	}
	l := openURLT(t, url)
	want := map[string]string{
		"2026-W32-0": allot.ReasonInProgress, "2026-W32-1": allot.ReasonAwaitingApproval, "2026-W32-2": allot.ReasonStepsCompleted,
		"2026-W32-3": allot.ReasonApprovalRejected, "2026-W32-4": "OutcomeUnknown", "2026-W32-5": "",
	}
	eps, err := l.ListEpisodes(ctxT(t), "weekly", "")
	if err != nil || len(eps) != len(want) {
		t.Fatalf("episodes after the migration: %d, %v", len(eps), err)
	}
	for _, ep := range eps {
		if ep.OutcomeReason != want[ep.ID] || ep.AllocatedByRun != "" {
			t.Errorf("episode %s (%s): reason %q, allocated by %q; want %q and none", ep.ID, ep.Outcome, ep.OutcomeReason, ep.AllocatedByRun, want[ep.ID])
		}
	}
}
