package ledger

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"allot"
)

// Conformance tests for Decide: a decision's effect and its record are one
// transaction, keyed by the request that made it (invariant 13); registered
// in runConformance so that both drivers run them.

// stepStatuses reads an episode's step records as step -> status.
func stepStatuses(t *testing.T, l *Ledger, ep Episode) map[string]allot.StepStatus {
	t.Helper()
	steps, err := l.Steps(ctxT(t), ep.Pipeline, ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]allot.StepStatus{}
	for _, s := range steps {
		out[s.Step] = s.Status
	}
	return out
}

// stepStates reads an episode's step records as step -> "status@revision".
func stepStates(t *testing.T, l *Ledger, ep Episode) map[string]string {
	t.Helper()
	steps, err := l.Steps(ctxT(t), ep.Pipeline, ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range steps {
		out[s.Step] = fmt.Sprintf("%s@%d", s.Status, s.Revision)
	}
	return out
}

func mustRecordStep(t *testing.T, l *Ledger, ep Episode, step string) {
	t.Helper()
	if err := l.RecordStep(ctxT(t), StepRecord{Pipeline: ep.Pipeline, EpisodeID: ep.ID, Step: step, Status: allot.StepCompleted}); err != nil {
		t.Fatal(err)
	}
}

// A retried request gets its first answer and applies nothing again, even
// after the ledger moved on so far that applying it now would be refused.
func testDecideIdempotent(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	mustIntentBy(t, l, r, "a1")
	mustMarkSending(t, l, r, "a1")
	adopt := adoptReq(ep, "render", "adopt-1", "vr-1", 900)
	d := mustDecide(t, l, adopt)
	if d.Revision != 0 || d.RemoteRef != "vr-1" || d.Action != allot.ActionAdopt {
		t.Fatalf("adopt decision: %+v", d)
	}
	if got := mustPaidTask(t, l, r); got.State != allot.PaidSubmitted || got.RemoteRef != "vr-1" || got.Owner != "" || got.MaybeSent {
		t.Fatalf("adopted task: %+v", got)
	}
	if c, err := l.Cost(ctxT(t), "vr-1"); err != nil || c.Amount != 900 {
		t.Fatalf("cost of the adopted task = %+v, %v", c, err)
	}
	// The task moves on; adopting it now would be refused.
	mustResult(t, l, r, "vr-1")
	_, _, err := l.Decide(ctxT(t), adoptReq(ep, "render", "adopt-2", "vr-1", 900))
	wantErr(t, "a new adopt of a succeeded task", err, ErrPaidTaskState, "succeeded")
	before := dumpTables(t, l)
	for name, retry := range map[string]DecisionRequest{
		"the same request":        adopt,
		"another payload":         adoptReq(ep, "render", "adopt-1", "vr-other", 5),
		"another action":          abandonReq(ep, "render", "adopt-1", "x"),
		"another step and action": reworkReq(ep, "voice", "adopt-1"),
	} {
		got, applied, err := l.Decide(ctxT(t), retry)
		if err != nil || applied || got != d {
			t.Fatalf("adopt-1 retried (%s) = %+v, %v, %v; want %+v, false", name, got, applied, err, d)
		}
	}
	mustBeUnchanged(t, l, "retried decisions", before)
	if got, ok, err := l.Decision(ctxT(t), "weekly", ep.ID, "adopt-1"); err != nil || !ok || got != d {
		t.Fatalf("Decision(adopt-1) = %+v, %v, %v; want %+v", got, ok, err, d)
	}

	// Abandon, then a rework: the retried abandon leaves the new revision.
	v := paidRef(ep, "voice", 0)
	mustIntent(t, l, v)
	ab := mustDecide(t, l, abandonReq(ep, "voice", "ab-1", "gave up"))
	rw := mustDecide(t, l, reworkReq(ep, "voice", "rw-1"))
	before = dumpTables(t, l)
	if got, applied, err := l.Decide(ctxT(t), abandonReq(ep, "voice", "ab-1", "gave up")); err != nil || applied || got != ab {
		t.Fatalf("abandon retried after a rework = %+v, %v, %v; want %+v", got, applied, err, ab)
	}
	mustBeUnchanged(t, l, "an abandon retried after a rework", before)
	if got := mustPaidTask(t, l, paidRef(ep, "voice", 1)); got.State != allot.PaidPlanned {
		t.Fatalf("the retried abandon reached the new revision: %+v", got)
	}
	// The rework retried after its revision was sent and settled plans no
	// third revision.
	v1 := paidRef(ep, "voice", 1)
	mustIntent(t, l, v1)
	mustSubmit(t, l, v1, "vr-v1", 10)
	mustResult(t, l, v1, "vr-v1")
	before = dumpTables(t, l)
	if got, applied, err := l.Decide(ctxT(t), reworkReq(ep, "voice", "rw-1")); err != nil || applied || got != rw || got.Revision != 1 {
		t.Fatalf("rework retried after its revision succeeded = %+v, %v, %v; want %+v", got, applied, err, rw)
	}
	mustBeUnchanged(t, l, "a rework retried after its revision succeeded", before)

	// An approval retried after a reassembly reset the approval step does
	// not approve again.
	mustDecide(t, l, decision(ep, "ap-1", allot.ActionApprove, "approval"))
	re := decision(ep, "re-1", allot.ActionReassemble, "")
	re.Reset = []string{"approval"}
	mustDecide(t, l, re)
	if _, applied, err := l.Decide(ctxT(t), decision(ep, "ap-1", allot.ActionApprove, "approval")); err != nil || applied {
		t.Fatalf("approval retried: %v, %v", applied, err)
	}
	if st := stepStates(t, l, ep); len(st) != 1 || st["approval"] != "reset@1" {
		t.Fatalf("a retried approval recorded the step again: %v", st)
	}
	// A refused request is not recorded: retried once the state allows
	// it, it applies.
	m := paidRef(ep, "music", 0)
	mustIntent(t, l, m)
	mustSubmit(t, l, m, "vr-m", 1)
	_, _, err = l.Decide(ctxT(t), reworkReq(ep, "music", "rw-m"))
	wantErr(t, "a rework while submitted", err, ErrPaidTaskState, "submitted")
	mustFailure(t, l, m, "vr-m", "boom")
	if d := mustDecide(t, l, reworkReq(ep, "music", "rw-m")); d.Revision != 1 {
		t.Fatalf("rework after the refusal: %+v", d)
	}
}

// The same request from concurrent retries is applied once; everyone gets
// its decision.
func testDecideConcurrentSameRequest(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	mustIntent(t, l, r)
	mustMarkSending(t, l, r, testOwner)
	v := paidRef(ep, "voice", 0)
	mustIntent(t, l, v)
	const n = 12
	got := make([]OperatorDecision, n)
	applied := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			req := adoptReq(ep, "render", "adopt-1", "vr-1", 500)
			if i%2 == 1 {
				req = abandonReq(ep, "voice", "ab-1", "gave up")
			}
			got[i], applied[i], errs[i] = l.Decide(ctxT(t), req)
		})
	}
	close(start)
	wg.Wait()
	appliedN := map[int]int{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if got[i] != got[i%2] {
			t.Fatalf("caller %d got %+v, caller %d got %+v", i, got[i], i%2, got[i%2])
		}
		if applied[i] {
			appliedN[i%2]++
		}
	}
	if appliedN[0] != 1 || appliedN[1] != 1 {
		t.Fatalf("applied %d adopts and %d abandons, want one of each", appliedN[0], appliedN[1])
	}
	if c := countRows(t, l, "operator_decisions"); c != 2 {
		t.Fatalf("%d decisions, want 2", c)
	}
	if cs := mustCosts(t, l, "weekly", ""); len(cs) != 1 || cs[0].Amount != 500 {
		t.Fatalf("costs = %+v, want one entry of 500", cs)
	}
	if got := mustPaidTask(t, l, v); got.State != allot.PaidAbandoned {
		t.Fatalf("voice: %+v", got)
	}

	// Distinct requests for one intent at once: one adopt wins, the others
	// find it submitted.
	m := paidRef(ep, "music", 0)
	mustIntent(t, l, m)
	start = make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			got[i], applied[i], errs[i] = l.Decide(ctxT(t), adoptReq(ep, "music", fmt.Sprintf("adopt-m%d", i), fmt.Sprintf("vr-m%d", i), 7))
		})
	}
	close(start)
	wg.Wait()
	winners := 0
	for i := range n {
		switch {
		case errs[i] == nil && applied[i]:
			winners++
		case errors.Is(errs[i], ErrPaidTaskState):
		default:
			t.Fatalf("adopt %d: %v, %v", i, applied[i], errs[i])
		}
	}
	if winners != 1 {
		t.Fatalf("%d distinct adopts of one intent applied, want 1", winners)
	}
	if cs := mustCosts(t, l, "weekly", ""); len(cs) != 2 {
		t.Fatalf("costs = %+v, want two entries", cs)
	}
	mustCheckClean(t, l, "")
}

// installDecisionTrap makes every insert of a decision whose request ID
// starts with "fail-" fail, after Decide has applied the decision's effect
// in the same transaction.
func installDecisionTrap(t *testing.T, l *Ledger) {
	t.Helper()
	switch l.d.name {
	case "sqlite":
		rawExec(t, l, `CREATE TRIGGER fail_decisions BEFORE INSERT ON operator_decisions
			WHEN NEW.request_id LIKE 'fail-%'
			BEGIN SELECT RAISE(ABORT, 'decision refused by the test trap'); END`)
	case "postgres":
		rawExec(t, l, `CREATE FUNCTION fail_decision() RETURNS trigger LANGUAGE plpgsql AS
			$$ BEGIN RAISE EXCEPTION 'decision refused by the test trap'; END $$`)
		rawExec(t, l, `CREATE TRIGGER fail_decisions BEFORE INSERT ON operator_decisions
			FOR EACH ROW WHEN (NEW.request_id LIKE 'fail-%') EXECUTE FUNCTION fail_decision()`)
	default:
		t.Fatalf("no decision trap for dialect %s", l.d.name)
	}
}

// A decision whose record cannot be written leaves its effect unwritten
// too, for every action; and a decision refused by the state writes neither.
func testDecideAtomic(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	for _, step := range []string{"plan", "assemble", "approval", "publish"} {
		mustRecordStep(t, l, ep, step)
	}
	done := paidRef(ep, "render", 0) // succeeded: rework
	mustIntent(t, l, done)
	mustSubmit(t, l, done, "vr-done", 10)
	mustResult(t, l, done, "vr-done")
	unknown := paidRef(ep, "voice", 0) // outcome unknown: adopt, resubmit, retry, abandon
	mustIntentBy(t, l, unknown, "a1")
	mustMarkSending(t, l, unknown, "a1")
	sent := paidRef(ep, "music", 0) // submitted: abandon
	mustIntent(t, l, sent)
	mustSubmit(t, l, sent, "vr-music", 20)
	installDecisionTrap(t, l)

	requests := func(prefix string) map[string]DecisionRequest {
		rework := reworkReq(ep, "render", prefix+"rework")
		rework.Reset = []string{"assemble", "approval", "publish"}
		reassemble := decision(ep, prefix+"reassemble", allot.ActionReassemble, "")
		reassemble.Reset = []string{"assemble", "approval", "publish"}
		return map[string]DecisionRequest{
			"approve":       decision(ep, prefix+"approve", allot.ActionApprove, "approval"),
			"reject":        decision(ep, prefix+"reject", allot.ActionReject, "approval"),
			"reassemble":    reassemble,
			"rework":        rework,
			"adopt":         adoptReq(ep, "voice", prefix+"adopt", "vr-voice", 30),
			"resubmit":      decision(ep, prefix+"resubmit", allot.ActionResubmit, "voice"),
			"retry":         decision(ep, prefix+"retry", allot.ActionRetry, "voice"),
			"abandon":       abandonReq(ep, "voice", prefix+"abandon", "gave up"),
			"abandon sent":  abandonReq(ep, "music", prefix+"abandon-sent", "vendor lost it"),
			"adopt, no fee": {OperatorDecision: adoptReq(ep, "voice", prefix+"adopt-free", "vr-free", 0).OperatorDecision, Adopted: Submission{RemoteRef: "vr-free"}},
		}
	}
	names := []string{"approve", "reject", "reassemble", "rework", "adopt", "resubmit", "retry", "abandon", "abandon sent", "adopt, no fee"}
	trapped := requests("fail-")
	for _, name := range names {
		before := dumpTables(t, l)
		d, applied, err := l.Decide(ctxT(t), trapped[name])
		if err == nil || applied {
			t.Fatalf("%s: Decide = %+v, %v, %v; want the trap's error", name, d, applied, err)
		}
		mustBeUnchanged(t, l, name+" whose record failed", before)
	}
	// An adopt whose cost cannot be written (a negative amount: the
	// database's CHECK) leaves the task an intent.
	neg := adoptReq(ep, "voice", "neg-adopt", "vr-neg", -5)
	before := dumpTables(t, l)
	if _, applied, err := l.Decide(ctxT(t), neg); err == nil || applied {
		t.Fatalf("adopt with a negative cost: applied %v, %v; want an error", applied, err)
	}
	mustBeUnchanged(t, l, "an adopt with a negative cost", before)

	// Without the trap each of them writes: the refusals above were real.
	// Applied one at a time on fresh copies of the state, in an order in
	// which each is allowed.
	ok := requests("ok-")
	for _, name := range []string{"approve", "reject", "retry", "resubmit", "reassemble", "rework", "abandon sent", "adopt"} {
		before := dumpTables(t, l)
		mustDecide(t, l, ok[name])
		if dumpDiff(before, dumpTables(t, l)) == "" {
			t.Fatalf("%s wrote nothing", name)
		}
	}
	// Reassembled, then reworked: each reset step is two revisions on.
	if st, want := stepStates(t, l, ep), map[string]string{"plan": "completed@0", "assemble": "reset@2", "approval": "reset@2", "publish": "reset@2"}; !maps.Equal(st, want) {
		t.Fatalf("steps after reassemble and rework: %v, want %v", st, want)
	}
	if got := mustPaidTask(t, l, unknown); got.State != allot.PaidSubmitted || got.RemoteRef != "vr-voice" {
		t.Fatalf("adopted: %+v", got)
	}
	if n := countRows(t, l, "operator_decisions"); n != 8 {
		t.Fatalf("%d decisions recorded, want 8", n)
	}
}

// Every step action in every state of the step's latest revision: the
// effect, or a refusal that writes nothing.
func testDecideActionsByState(t *testing.T, l *Ledger) {
	states := []struct {
		name  string
		word  string // how a refusal names the state
		setup func(t *testing.T, ep Episode)
	}{
		{"none", "render", func(t *testing.T, ep Episode) {}},
		{"planned", "planned", func(t *testing.T, ep Episode) { mustRework(t, l, ep, "render", "setup") }},
		{"intent", "intent", func(t *testing.T, ep Episode) { mustIntentBy(t, l, paidRef(ep, "render", 0), "a1") }},
		{"outcome unknown", "outcome unknown", func(t *testing.T, ep Episode) {
			mustIntentBy(t, l, paidRef(ep, "render", 0), "a1")
			mustMarkSending(t, l, paidRef(ep, "render", 0), "a1")
		}},
		{"submitted", "submitted", func(t *testing.T, ep Episode) {
			mustIntent(t, l, paidRef(ep, "render", 0))
			mustSubmit(t, l, paidRef(ep, "render", 0), "vr-"+ep.ID, 10)
		}},
		{"succeeded", "succeeded", func(t *testing.T, ep Episode) {
			mustIntent(t, l, paidRef(ep, "render", 0))
			mustSubmit(t, l, paidRef(ep, "render", 0), "vr-"+ep.ID, 10)
			mustResult(t, l, paidRef(ep, "render", 0), "vr-"+ep.ID)
		}},
		{"failed", "failed", func(t *testing.T, ep Episode) {
			mustIntent(t, l, paidRef(ep, "render", 0))
			mustSubmit(t, l, paidRef(ep, "render", 0), "vr-"+ep.ID, 10)
			mustFailure(t, l, paidRef(ep, "render", 0), "vr-"+ep.ID, "vendor: boom")
		}},
		{"abandoned", "abandoned", func(t *testing.T, ep Episode) {
			mustIntent(t, l, paidRef(ep, "render", 0))
			mustDecide(t, l, abandonReq(ep, "render", "setup", "gave up"))
		}},
	}
	const (
		rework   = allot.ActionRework
		adopt    = allot.ActionAdopt
		resubmit = allot.ActionResubmit
		retry    = allot.ActionRetry
		abandon  = allot.ActionAbandon
	)
	st, nf := ErrPaidTaskState, ErrPaidTaskNotFound
	// nil: applied.
	want := map[string]map[allot.Action]error{
		"none":            {rework: nil, adopt: nf, resubmit: nf, retry: nf, abandon: nf},
		"planned":         {rework: st, adopt: st, resubmit: st, retry: nil, abandon: nil},
		"intent":          {rework: st, adopt: nil, resubmit: nil, retry: nil, abandon: nil},
		"outcome unknown": {rework: st, adopt: nil, resubmit: nil, retry: nil, abandon: nil},
		"submitted":       {rework: st, adopt: st, resubmit: st, retry: nil, abandon: nil},
		"succeeded":       {rework: nil, adopt: st, resubmit: st, retry: nil, abandon: st},
		"failed":          {rework: nil, adopt: st, resubmit: st, retry: nil, abandon: nil},
		"abandoned":       {rework: nil, adopt: st, resubmit: st, retry: nil, abandon: st},
	}
	for _, s := range states {
		for _, action := range []allot.Action{rework, adopt, resubmit, retry, abandon} {
			t.Run(s.name+"/"+string(action), func(t *testing.T) {
				ep := alloc(t, l, "weekly", s.name+"/"+string(action), "2026-W32", 0).Episode
				s.setup(t, ep)
				mustRecordStep(t, l, ep, "publish") // a step after render, which a rework resets
				latest, hasLatest := PaidTask{}, false
				if pt, err := l.LatestPaidTask(ctxT(t), ep.Pipeline, ep.ID, "render"); err == nil {
					latest, hasLatest = pt, true
				}
				req := decision(ep, "req-1", action, "render")
				switch action {
				case rework:
					req.Reset = []string{"publish"}
				case adopt:
					req = adoptReq(ep, "render", "req-1", "vr-adopted-"+ep.ID, 42)
				case abandon:
					req.Reason = "operator gave up"
				}
				before := dumpTables(t, l)
				d, applied, err := l.Decide(ctxT(t), req)
				if w := want[s.name][action]; w != nil {
					wantErr(t, fmt.Sprintf("%s of a task that is %s", action, s.name), err, w, s.word)
					mustBeUnchanged(t, l, "a refused "+string(action), before)
					return
				}
				if err != nil || !applied {
					t.Fatalf("Decide = %+v, %v, %v; want it applied", d, applied, err)
				}
				if stored, ok, err := l.Decision(ctxT(t), ep.Pipeline, ep.ID, "req-1"); err != nil || !ok || stored != d {
					t.Fatalf("stored decision %+v, %v, %v; want %+v", stored, ok, err, d)
				}
				if d.Step != "render" || d.Action != action || d.Reason != req.Reason || d.RemoteRef != req.RemoteRef {
					t.Fatalf("decision %+v for request %+v", d, req.OperatorDecision)
				}
				ts, err := l.PaidTasks(ctxT(t), ep.Pipeline, ep.ID)
				if err != nil {
					t.Fatal(err)
				}
				steps := stepStates(t, l, ep)
				if action != rework {
					if d.Revision != latest.Revision || len(ts) != 1 {
						t.Fatalf("%s acted on revision %d of %v, want %d", action, d.Revision, ts, latest.Revision)
					}
					if steps["publish"] != "completed@0" {
						t.Fatalf("%s reset steps: %v", action, steps)
					}
				}
				got := ts[len(ts)-1]
				switch action {
				case rework:
					rev := 0
					if hasLatest {
						rev = latest.Revision + 1
					}
					if d.Revision != rev || got.Revision != rev || got.State != allot.PaidPlanned || got.RequestID != "req-1" || got.IdempotencyKey != "" {
						t.Fatalf("rework planned %+v (decision %+v), want revision %d", got, d, rev)
					}
					if hasLatest && ts[len(ts)-2] != latest {
						t.Fatalf("rework changed the previous revision: %+v, was %+v", ts[len(ts)-2], latest)
					}
					if steps["publish"] != "reset@1" {
						t.Fatalf("rework did not reset the step after it: %v", steps)
					}
				case adopt:
					if got.State != allot.PaidSubmitted || got.RemoteRef != req.RemoteRef || got.Owner != "" || got.MaybeSent || got.ResubmitRequest != "" {
						t.Fatalf("adopted: %+v", got)
					}
					if c, err := l.Cost(ctxT(t), req.RemoteRef); err != nil || c.Amount != 42 || c.Step != "render" {
						t.Fatalf("cost of the adopted task: %+v, %v", c, err)
					}
				case resubmit:
					w := latest
					w.ResubmitRequest, w.UpdatedAt = "req-1", got.UpdatedAt
					if got != w {
						t.Fatalf("after resubmit %+v, want %+v", got, w)
					}
				case retry:
					if got != latest {
						t.Fatalf("retry changed the task: %+v, was %+v", got, latest)
					}
				case abandon:
					w := latest
					w.State, w.Error, w.Owner, w.ResubmitRequest, w.UpdatedAt = allot.PaidAbandoned, "operator gave up", "", "", got.UpdatedAt
					if got != w {
						t.Fatalf("abandoned %+v, want %+v", got, w)
					}
				}
			})
		}
	}
	mustCheckClean(t, l, "")
}

// approve, reject and reassemble act on step records, not paid tasks.
func testDecideEpisodeActions(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	mustRecordStep(t, l, ep, "assemble")
	at := time.Date(2026, 8, 4, 12, 0, 0, 0, time.UTC)
	ap := decision(ep, "ap-1", allot.ActionApprove, "approval")
	ap.At, ap.Reason = at, "looks good"
	d := mustDecide(t, l, ap)
	if d.Step != "approval" || d.Revision != 0 || !d.At.Equal(at) {
		t.Fatalf("approve decision: %+v", d)
	}
	steps, err := l.Steps(ctxT(t), "weekly", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(steps, func(s StepRecord) bool { return s.Step == "approval" })
	if i < 0 || steps[i].Status != allot.StepApproved || !steps[i].CompletedAt.Equal(at) {
		t.Fatalf("approval step after approve: %+v", steps)
	}
	mustDecide(t, l, decision(ep, "rj-1", allot.ActionReject, "approval"))
	if st := stepStatuses(t, l, ep); st["approval"] != allot.StepRejected || st["assemble"] != allot.StepCompleted {
		t.Fatalf("steps after reject: %v", st)
	}
	if _, applied, err := l.Decide(ctxT(t), decision(ep, "ap-1", allot.ActionApprove, "approval")); err != nil || applied {
		t.Fatalf("approve retried: %v, %v", applied, err)
	}
	if st := stepStatuses(t, l, ep); st["approval"] != allot.StepRejected {
		t.Fatalf("a retried approve approved again: %v", st)
	}
	re := decision(ep, "re-1", allot.ActionReassemble, "")
	re.Reset = []string{"assemble", "approval"}
	mustDecide(t, l, re)
	if st, want := stepStates(t, l, ep), map[string]string{"assemble": "reset@1", "approval": "reset@1"}; !maps.Equal(st, want) {
		t.Fatalf("steps after reassemble: %v, want %v", st, want)
	}
	if ts, err := l.PaidTasks(ctxT(t), "weekly", ep.ID); err != nil || len(ts) != 0 {
		t.Fatalf("episode actions wrote paid tasks: %+v, %v", ts, err)
	}
	before := dumpTables(t, l)
	missing := decision(Episode{Pipeline: "weekly", ID: "2026-W32-9"}, "ap-9", allot.ActionApprove, "approval")
	_, _, err = l.Decide(ctxT(t), missing)
	wantErr(t, "approving a missing episode", err, ErrEpisodeNotFound, "2026-W32-9")
	mustBeUnchanged(t, l, "an approval of a missing episode", before)
}

// An adopted task's cost is checked like a submission's: an amount without
// a currency, or a negative one, is invalid input and nothing is written.
func testDecideAdoptChecksCost(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	mustIntent(t, l, r)
	for name, adopted := range map[string]Submission{
		"no currency":     {RemoteRef: "vr-1", Amount: 900},
		"negative amount": {RemoteRef: "vr-1", Amount: -5, Currency: "EUR"},
		"above the bound": {RemoteRef: "vr-1", Amount: allot.MaxAmount + 1, Currency: "EUR"},
	} {
		req := adoptReq(ep, "render", "adopt-"+name, "vr-1", 0)
		req.Adopted = adopted
		before := dumpTables(t, l)
		_, _, err := l.Decide(ctxT(t), req)
		wantErr(t, "adopt, "+name, err, ErrInvalidInput)
		mustBeUnchanged(t, l, "an adopt with an invalid cost", before)
	}
}

// A decision keeps who made it: Decide returns it, Decisions and Decision
// read it back, and a retried request keeps the first request's actor.
func testDecideRecordsWho(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	ap := decision(ep, "ap-who", allot.ActionApprove, "approval")
	ap.By = "alice"
	if d := mustDecide(t, l, ap); d.By != "alice" {
		t.Fatalf("approve by alice returned by %q", d.By)
	}
	again := ap
	again.By = "bob"
	if d, applied, err := l.Decide(ctxT(t), again); err != nil || applied || d.By != "alice" {
		t.Fatalf("the request retried by bob: %+v, applied %v, %v; want alice's decision, not applied", d, applied, err)
	}
	auto := decision(ep, "rj-auto", allot.ActionReject, "approval")
	mustDecide(t, l, auto)
	ds, err := l.Decisions(ctxT(t), "weekly", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	var who []string
	for _, d := range ds {
		who = append(who, d.RequestID+"="+d.By)
	}
	if want := []string{"ap-who=alice", "rj-auto="}; !slices.Equal(who, want) {
		t.Fatalf("decisions by %v, want %v", who, want)
	}
	if d, ok, err := l.Decision(ctxT(t), "weekly", ep.ID, "ap-who"); err != nil || !ok || d.By != "alice" {
		t.Fatalf("Decision(ap-who) = %+v, %v, %v; want by alice", d, ok, err)
	}
}
