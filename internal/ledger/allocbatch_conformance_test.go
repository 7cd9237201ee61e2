package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// Group commit (allocbatch.go): concurrent allocations share a transaction,
// and must answer exactly as the same calls would one after the other, each
// in a transaction of its own. The cases below run on both paths: on the
// batched one, allocateInArrivalOrder makes the calls share one
// transaction; on the unbatched one, it makes them one after the other.

// unbatchedAllocationCases run again on the unbatched path
// (alloc.off), which group commit must agree with.
var unbatchedAllocationCases = []struct {
	name string
	fn   func(t *testing.T, l *Ledger)
}{
	{"ConcurrentDistinctKeys", testConcurrentDistinctKeys},
	{"ConcurrentSameKey", testConcurrentSameKey},
	{"ReuseReturnsStoredEpisode", testReuse},
	{"KeyCrossesPeriod", testKeyCrossesPeriod},
	{"NewPeriodStartsAtZero", testNewPeriodStartsAtZero},
	{"CapSkips", testCapSkips},
	{"Ambiguous", testAmbiguous},
	{"PipelinesIndependent", testPipelinesIndependent},
	{"InvalidInput", testInvalidInput},
	{"AllocatingRunGetsItsAnswer", testAllocatingRunGetsItsAnswer},
	{"InputsClaim", testInputsClaim},
	{"InputsConcurrentClaims", testInputsConcurrentClaims},
	{"GroupCommitNeighbours", testGroupCommitNeighbours},
	{"GroupCommitMixed", testGroupCommitMixed},
	{"GroupCommitInputs", testGroupCommitInputs},
}

// waitFor polls cond until it holds, failing the test after a generous
// deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// holdAllocationLock takes, in a transaction of the test's, the lock an
// allocation in pipeline needs (SQLite: the single writer; PostgreSQL: the
// pipeline's advisory lock) and returns its release.
func holdAllocationLock(t *testing.T, l *Ledger, pipeline string) func() {
	t.Helper()
	tx, err := l.w.BeginTx(ctxT(t), l.txOptions)
	if err != nil {
		t.Fatal(err)
	}
	if l.d.lockPipeline != "" {
		if _, err := tx.ExecContext(ctxT(t), l.d.q(l.d.lockPipeline), lockKey(pipeline)); err != nil {
			_ = tx.Rollback()
			t.Fatal(err)
		}
	}
	return func() {
		if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			t.Error(err)
		}
	}
}

// allocQueue says whether a goroutine serves key and how many of its
// requests wait to be taken.
func allocQueue(l *Ledger, key string) (served bool, queued int) {
	l.alloc.mu.Lock()
	defer l.alloc.mu.Unlock()
	q, served := l.alloc.queues[key]
	return served, len(q)
}

// allocateInArrivalOrder runs ins, all of one pipeline and at least three,
// and returns their answers. On the batched path it calls them at once in
// a known order: while the test holds the allocation lock, ins[0] is taken
// into a transaction of its own and waits for the lock; ins[1:] queue
// behind it one after the other; then the lock is released, and ins[1:] must
// share one transaction (the ledger's commit count says so). On the
// unbatched path it calls them one after the other: the answers group
// commit must give.
func allocateInArrivalOrder(t *testing.T, l *Ledger, ins []AllocateInput) ([]AllocateResult, []error) {
	t.Helper()
	if len(ins) < 3 {
		t.Fatalf("allocateInArrivalOrder needs at least 3 calls, got %d", len(ins))
	}
	results, errs := make([]AllocateResult, len(ins)), make([]error, len(ins))
	if l.alloc.off {
		for i, in := range ins {
			results[i], errs[i] = l.Allocate(ctxT(t), in)
		}
		return results, errs
	}
	key := l.allocBatchKey(ins[0].Pipeline)
	for _, in := range ins {
		if l.allocBatchKey(in.Pipeline) != key {
			t.Fatalf("allocateInArrivalOrder: pipelines %s and %s do not share a batch", ins[0].Pipeline, in.Pipeline)
		}
	}
	release := holdAllocationLock(t, l, ins[0].Pipeline)
	defer release()
	before := l.alloc.txs.Load()
	done := make(chan int, len(ins))
	call := func(i int) {
		go func() {
			results[i], errs[i] = l.Allocate(ctxT(t), ins[i])
			done <- i
		}()
	}
	call(0)
	waitFor(t, "the first call to be taken into a transaction", func() bool {
		served, queued := allocQueue(l, key)
		return served && queued == 0
	})
	for i := 1; i < len(ins); i++ {
		call(i)
		waitFor(t, fmt.Sprintf("call %d to queue", i), func() bool {
			_, queued := allocQueue(l, key)
			return queued == i
		})
	}
	release()
	for range ins {
		<-done
	}
	want := int64(1) // ins[1:]
	if errs[0] == nil {
		want++
	}
	if got := l.alloc.txs.Load() - before; got != want {
		t.Errorf("%d calls committed in %d transactions, want %d: the first alone, the rest together", len(ins), got, want)
	}
	return results, errs
}

// poisonEpisodes makes the database refuse to insert an episode whose key
// starts with "poison": an SQL error inside an allocation, which on
// PostgreSQL aborts the transaction it happens in.
func poisonEpisodes(t *testing.T, l *Ledger) {
	if l.d.name == sqliteDialect.name {
		rawExec(t, l, `CREATE TRIGGER poison_episode BEFORE INSERT ON episodes WHEN NEW.allocation_key LIKE 'poison%'
			BEGIN SELECT RAISE(ABORT, 'poisoned allocation key'); END`)
		return
	}
	rawExec(t, l, `CREATE FUNCTION poison_episode() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'poisoned allocation key %', NEW.allocation_key; END $$`)
	rawExec(t, l, `CREATE TRIGGER poison_episode BEFORE INSERT ON episodes FOR EACH ROW
		WHEN (NEW.allocation_key LIKE 'poison%') EXECUTE FUNCTION poison_episode()`)
}

// poisonClaims makes the database refuse an input's claim by an episode
// whose key starts with "poison": the allocation has inserted its episode
// when it fails, and must take it back.
func poisonClaims(t *testing.T, l *Ledger) {
	if l.d.name == sqliteDialect.name {
		rawExec(t, l, `CREATE TRIGGER poison_claim BEFORE UPDATE ON inputs
			WHEN EXISTS (SELECT 1 FROM episodes e WHERE e.pipeline = NEW.pipeline AND e.episode_id = NEW.episode_id AND e.allocation_key LIKE 'poison%')
			BEGIN SELECT RAISE(ABORT, 'poisoned claim'); END`)
		return
	}
	rawExec(t, l, `CREATE FUNCTION poison_claim() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF EXISTS (SELECT 1 FROM episodes e WHERE e.pipeline = NEW.pipeline AND e.episode_id = NEW.episode_id AND e.allocation_key LIKE 'poison%') THEN
				RAISE EXCEPTION 'poisoned claim';
			END IF;
			RETURN NEW;
		END $$`)
	rawExec(t, l, `CREATE TRIGGER poison_claim BEFORE UPDATE ON inputs FOR EACH ROW EXECUTE FUNCTION poison_claim()`)
}

// wantAlloc is what one call must answer: an episode ID ("" when skipped),
// or an error (errIs, or any error when errIs is errAny).
type wantAlloc struct {
	decision Decision
	reason   string
	episode  string
	input    string
	errIs    error
}

var errAny = errors.New("any error")

func checkAnswers(t *testing.T, ins []AllocateInput, results []AllocateResult, errs []error, want []wantAlloc) {
	t.Helper()
	for i, w := range want {
		r, err := results[i], errs[i]
		switch {
		case w.errIs != nil:
			if err == nil || (w.errIs != errAny && !errors.Is(err, w.errIs)) {
				t.Errorf("call %d (key %s, %s): got %s/%s %s, %v; want error %v", i, ins[i].Key, ins[i].Period, r.Decision, r.Reason, r.Episode.ID, err, w.errIs)
			}
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("call %d (key %s): %v, want its own failure", i, ins[i].Key, err)
			}
		case err != nil:
			t.Errorf("call %d (key %s, %s): %v; want %s/%s %s", i, ins[i].Key, ins[i].Period, err, w.decision, w.reason, w.episode)
		default:
			in := ""
			if r.Input != nil {
				in = r.Input.Ref
				if r.Input.EpisodeID != r.Episode.ID {
					t.Errorf("call %d (key %s): input %s belongs to episode %s, not %s", i, ins[i].Key, in, r.Input.EpisodeID, r.Episode.ID)
				}
			}
			if r.Decision != w.decision || r.Reason != w.reason || r.Episode.ID != w.episode || in != w.input {
				t.Errorf("call %d (key %s, %s): got %s/%s %q input %q; want %s/%s %q input %q", i, ins[i].Key, ins[i].Period,
					r.Decision, r.Reason, r.Episode.ID, in, w.decision, w.reason, w.episode, w.input)
			}
			if r.Episode.ID != "" && (r.Episode.AllocationKey != ins[i].Key || r.Episode.Pipeline != ins[i].Pipeline) {
				t.Errorf("call %d (key %s) got another call's episode: %+v", i, ins[i].Key, r.Episode)
			}
		}
	}
}

// mustBeDense fails unless period holds exactly sequences 0..n-1.
func mustBeDense(t *testing.T, l *Ledger, pipeline, period string, n int) {
	t.Helper()
	eps, err := l.ListEpisodes(ctxT(t), pipeline, period)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int
	for _, e := range eps {
		seqs = append(seqs, e.Sequence)
	}
	for i, s := range seqs {
		if s != i || len(seqs) != n {
			t.Fatalf("%s/%s holds sequences %v, want 0..%d", pipeline, period, seqs, n-1)
		}
	}
	if len(seqs) != n {
		t.Fatalf("%s/%s holds sequences %v, want 0..%d", pipeline, period, seqs, n-1)
	}
}

// A failure of one allocation does not fail its neighbours: 32 callers at
// once, of which some ask for keys bound in another period, and one for a
// key bound twice (imported data); those fail, and the others get dense
// sequences in their period, in arrival order. (Failures that write or
// fail a statement: GroupCommitMixed and GroupCommitInputs.)
func testGroupCommitNeighbours(t *testing.T, l *Ledger) {
	for i := range 7 {
		alloc(t, l, "weekly", fmt.Sprintf("cross-%d", i), "2026-W31", 0)
	}
	rawExec(t, l, `DROP INDEX episodes_pipeline_key_uniq`)
	rawInsertEpisode(t, l, "weekly", "2026-W30-0", "2026-W30", 0, "dup")
	rawInsertEpisode(t, l, "weekly", "2026-W30-1", "2026-W30", 1, "dup")
	var (
		ins  []AllocateInput
		want []wantAlloc
		seq  int
	)
	for i := range 32 {
		in := AllocateInput{Pipeline: "weekly", Key: fmt.Sprintf("run-%02d", i), Period: "2026-W32", NominalTime: t0}
		var w wantAlloc
		switch {
		case i%5 == 3:
			in.Key = fmt.Sprintf("cross-%d", i/5)
			w.errIs = ErrKeyCrossesPeriod
		case i == 17:
			in.Key = "dup"
			w.errIs = ErrKeyAmbiguous
		default:
			w = wantAlloc{decision: DecisionAllocated, reason: ReasonNewEpisode, episode: EpisodeID("2026-W32", seq)}
			seq++
		}
		ins, want = append(ins, in), append(want, w)
	}
	results, errs := allocateInArrivalOrder(t, l, ins)
	checkAnswers(t, ins, results, errs, want)
	mustBeDense(t, l, "weekly", "2026-W32", seq)
	mustBeDense(t, l, "weekly", "2026-W31", 7)
	mustBeDense(t, l, "weekly", "2026-W30", 2)
}

// One transaction of everything an allocation can answer: new keys, one
// key asked several times (by its allocating run and by others), a key
// bound before, keys bound in another period, a cap reached within the
// transaction and a key the database refuses.
func testGroupCommitMixed(t *testing.T, l *Ledger) {
	poisonEpisodes(t, l)
	alloc(t, l, "weekly", "bound", "2026-W32", 0)
	alloc(t, l, "weekly", "cross", "2026-W31", 0)
	in := func(key, period string, capN int, runID string) AllocateInput {
		return AllocateInput{Pipeline: "weekly", Key: key, Period: period, NominalTime: t0, MaxPerPeriod: capN, RunID: runID}
	}
	allocated := func(id string) wantAlloc {
		return wantAlloc{decision: DecisionAllocated, reason: ReasonNewEpisode, episode: id}
	}
	reused := func(id string) wantAlloc {
		return wantAlloc{decision: DecisionReused, reason: ReasonKeyBound, episode: id}
	}
	calls := []struct {
		in   AllocateInput
		want wantAlloc
	}{
		{in("d0", "2026-W32", 0, ""), allocated("2026-W32-1")},
		{in("d1", "2026-W32", 0, ""), allocated("2026-W32-2")},
		{in("same", "2026-W32", 0, "run-a"), allocated("2026-W32-3")},
		{in("cross", "2026-W32", 0, ""), wantAlloc{errIs: ErrKeyCrossesPeriod}},
		{in("same", "2026-W32", 0, "run-b"), reused("2026-W32-3")},
		{in("poison-1", "2026-W32", 0, ""), wantAlloc{errIs: errAny}},
		{in("d2", "2026-W32", 0, ""), allocated("2026-W32-4")},
		{in("same", "2026-W32", 0, "run-a"), allocated("2026-W32-3")}, // the allocating run again
		{in("bound", "2026-W32", 0, ""), reused("2026-W32-0")},
		{in("same", "2026-W33", 0, "run-a"), wantAlloc{errIs: ErrKeyCrossesPeriod}},
		{in("c0", "2026-W40", 2, ""), allocated("2026-W40-0")},
		{in("c1", "2026-W40", 2, ""), allocated("2026-W40-1")},
		{in("c2", "2026-W40", 2, ""), wantAlloc{decision: DecisionSkipped, reason: ReasonCapReached}},
		{in("c1", "2026-W40", 2, ""), reused("2026-W40-1")}, // bound before the cap was reached
		{in("poison-2", "2026-W41", 2, ""), wantAlloc{errIs: errAny}},
		{in("c3", "2026-W41", 2, ""), allocated("2026-W41-0")},
		{in("d3", "2026-W32", 0, ""), allocated("2026-W32-5")},
	}
	var (
		ins  []AllocateInput
		want []wantAlloc
	)
	for _, c := range calls {
		ins, want = append(ins, c.in), append(want, c.want)
	}
	results, errs := allocateInArrivalOrder(t, l, ins)
	checkAnswers(t, ins, results, errs, want)
	// Every answer is the ledger's: what a call was told is what is stored.
	for i, r := range results {
		if errs[i] != nil || r.Episode.ID == "" {
			continue
		}
		stored, err := l.EpisodeByKey(ctxT(t), "weekly", ins[i].Key)
		if err != nil || stored != r.Episode {
			t.Errorf("call %d (key %s) was told %+v, the ledger holds %+v, %v", i, ins[i].Key, r.Episode, stored, err)
		}
	}
	mustBeDense(t, l, "weekly", "2026-W32", 6)
	mustBeDense(t, l, "weekly", "2026-W40", 2)
	mustBeDense(t, l, "weekly", "2026-W41", 1)
	mustCheckClean(t, l, "")
}

// Claims in one transaction: each new episode claims the oldest input
// still ready after the calls before it; a call that fails after inserting
// its episode takes the episode back and leaves its input to the next.
func testGroupCommitInputs(t *testing.T, l *Ledger) {
	poisonClaims(t, l)
	for i := range 4 {
		addInput(t, l, "drafts", fmt.Sprintf("in-%d", i), t0.Add(-time.Duration(10-i)*time.Minute), "")
	}
	in := func(key string) AllocateInput {
		return AllocateInput{Pipeline: "drafts", Key: key, Period: "2026-08-03", NominalTime: t0, ClaimInput: true}
	}
	claimed := func(seq int, input string) wantAlloc {
		return wantAlloc{decision: DecisionAllocated, reason: ReasonNewEpisode, episode: EpisodeID("2026-08-03", seq), input: input}
	}
	calls := []struct {
		in   AllocateInput
		want wantAlloc
	}{
		{in("k0"), claimed(0, "in-0")},
		{in("k1"), claimed(1, "in-1")},
		{in("poison-a"), wantAlloc{errIs: errAny}},
		{in("k2"), claimed(2, "in-2")},
		{in("k1"), wantAlloc{decision: DecisionReused, reason: ReasonKeyBound, episode: "2026-08-03-1", input: "in-1"}},
		{in("poison-b"), wantAlloc{errIs: errAny}},
		{in("k3"), claimed(3, "in-3")},
		{in("k4"), wantAlloc{decision: DecisionSkipped, reason: ReasonNoReadyInput}},
	}
	var (
		ins  []AllocateInput
		want []wantAlloc
	)
	for _, c := range calls {
		ins, want = append(ins, c.in), append(want, c.want)
	}
	results, errs := allocateInArrivalOrder(t, l, ins)
	checkAnswers(t, ins, results, errs, want)
	mustBeDense(t, l, "drafts", "2026-08-03", 4)
	got, err := l.Inputs(ctxT(t), "drafts", "")
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, in := range got {
		states = append(states, in.Ref+":"+string(in.State)+":"+in.EpisodeID)
	}
	if want := []string{"in-0:claimed:2026-08-03-0", "in-1:claimed:2026-08-03-1", "in-2:claimed:2026-08-03-2", "in-3:claimed:2026-08-03-3"}; !slices.Equal(states, want) {
		t.Fatalf("inputs %v, want %v", states, want)
	}
	for _, key := range []string{"poison-a", "poison-b"} {
		if _, err := l.EpisodeByKey(ctxT(t), "drafts", key); !errors.Is(err, ErrEpisodeNotFound) {
			t.Errorf("refused key %s kept its episode: %v", key, err)
		}
	}
}

// A caller that gives up while its request waits returns at once with its
// context's error; its request is not run, so it writes nothing, and the
// callers around it get their own answers. A transaction whose every
// caller has left is abandoned, and the ledger goes on allocating.
func testGroupCommitCancelledCaller(t *testing.T, l *Ledger) {
	in := func(key string) AllocateInput {
		return AllocateInput{Pipeline: "weekly", Key: key, Period: "2026-W32", NominalTime: t0}
	}
	key := l.allocBatchKey("weekly")
	release := holdAllocationLock(t, l, "weekly")
	defer release()

	type answer struct {
		res AllocateResult
		err error
	}
	call := func(ctx context.Context, key string) chan answer {
		ch := make(chan answer, 1)
		go func() {
			r, err := l.Allocate(ctx, in(key))
			ch <- answer{r, err}
		}()
		return ch
	}
	// The first is taken into a transaction, which waits for the lock; its
	// caller leaves, and with it the transaction's last caller.
	firstCtx, cancelFirst := context.WithCancel(ctxT(t))
	first := call(firstCtx, "first")
	waitFor(t, "the first call to be taken", func() bool { served, queued := allocQueue(l, key); return served && queued == 0 })
	cancelFirst()
	if a := <-first; !errors.Is(a.err, context.Canceled) {
		t.Fatalf("a caller that left while its transaction waited: %+v, %v; want context.Canceled", a.res, a.err)
	}
	waitFor(t, "the abandoned transaction to end", func() bool { served, _ := allocQueue(l, key); return !served })
	// The next is taken and waits for the lock; two queue behind it, and
	// the first of those leaves.
	before := call(ctxT(t), "before")
	waitFor(t, "before to be taken", func() bool { served, queued := allocQueue(l, key); return served && queued == 0 })
	leftCtx, cancelLeft := context.WithCancel(ctxT(t))
	left := call(leftCtx, "left")
	waitFor(t, "left to queue", func() bool { _, queued := allocQueue(l, key); return queued == 1 })
	after := call(ctxT(t), "after")
	waitFor(t, "after to queue", func() bool { _, queued := allocQueue(l, key); return queued == 2 })
	cancelLeft()
	if a := <-left; !errors.Is(a.err, context.Canceled) {
		t.Fatalf("a caller that left while it waited: %+v, %v; want context.Canceled", a.res, a.err)
	}
	release()
	for name, ch := range map[string]chan answer{"before": before, "after": after} {
		a := <-ch
		if a.err != nil || a.res.Decision != DecisionAllocated || a.res.Episode.AllocationKey != name {
			t.Errorf("%s: %+v, %v; want its own new episode", name, a.res, a.err)
		}
	}
	for _, gone := range []string{"first", "left"} {
		if _, err := l.EpisodeByKey(ctxT(t), "weekly", gone); !errors.Is(err, ErrEpisodeNotFound) {
			t.Errorf("the request of %s, whose caller left before it ran, was saved: %v", gone, err)
		}
	}
	mustBeDense(t, l, "weekly", "2026-W32", 2)
	// Nothing is stuck: the callers who left can retry.
	if r := alloc(t, l, "weekly", "left", "2026-W32", 0); r.Decision != DecisionAllocated || r.Episode.ID != "2026-W32-2" {
		t.Fatalf("the retry of a caller that left: %+v", r)
	}
}

// A caller that leaves while its request runs in a shared transaction does
// not end the transaction for the others: they get their answers, and its
// request commits too (its retry gets the episode back). PostgreSQL only: a
// trigger there can make a request wait inside the transaction.
func TestPostgresGroupCommitCallerLeavesMidTransaction(t *testing.T) {
	l := openPostgresT(t)
	const gateKey = 424242
	rawExec(t, l, `CREATE FUNCTION wait_episode() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_xact_lock(424242); RETURN NEW; END $$`)
	rawExec(t, l, `CREATE TRIGGER wait_episode BEFORE INSERT ON episodes FOR EACH ROW
		WHEN (NEW.allocation_key LIKE 'wait%') EXECUTE FUNCTION wait_episode()`)
	gate, err := l.w.BeginTx(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Rollback()
	if _, err := gate.ExecContext(ctxT(t), `SELECT pg_advisory_xact_lock($1)`, gateKey); err != nil {
		t.Fatal(err)
	}

	type answer struct {
		res AllocateResult
		err error
	}
	call := func(ctx context.Context, key string) chan answer {
		ch := make(chan answer, 1)
		go func() {
			r, err := l.Allocate(ctx, AllocateInput{Pipeline: "weekly", Key: key, Period: "2026-W32", NominalTime: t0})
			ch <- answer{r, err}
		}()
		return ch
	}
	// "first" alone, then "wait-a" and "b" together, in that order.
	release := holdAllocationLock(t, l, "weekly")
	defer release()
	first := call(ctxT(t), "first")
	waitFor(t, "first to be taken", func() bool { served, queued := allocQueue(l, "weekly"); return served && queued == 0 })
	leaveCtx, leave := context.WithCancel(ctxT(t))
	defer leave()
	a := call(leaveCtx, "wait-a")
	waitFor(t, "wait-a to queue", func() bool { _, queued := allocQueue(l, "weekly"); return queued == 1 })
	b := call(ctxT(t), "b")
	waitFor(t, "b to queue", func() bool { _, queued := allocQueue(l, "weekly"); return queued == 2 })
	release()
	if r := <-first; r.err != nil || r.res.Episode.ID != "2026-W32-0" {
		t.Fatalf("first: %+v, %v", r.res, r.err)
	}
	waitFor(t, "wait-a's insert to wait at the gate", func() bool {
		var n int
		err := l.r.QueryRowContext(ctxT(t), `SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = 0 AND objid = $1`, gateKey).Scan(&n)
		return err == nil && n > 0
	})
	leave()
	if r := <-a; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("a caller that left mid-transaction: %+v, %v; want context.Canceled at once", r.res, r.err)
	}
	if err := gate.Rollback(); err != nil {
		t.Fatal(err)
	}
	if r := <-b; r.err != nil || r.res.Decision != DecisionAllocated || r.res.Episode.ID != "2026-W32-2" || r.res.Episode.AllocationKey != "b" {
		t.Fatalf("b, in the transaction of a caller that left: %+v, %v; want its own episode 2026-W32-2", r.res, r.err)
	}
	again, err := l.Allocate(ctxT(t), AllocateInput{Pipeline: "weekly", Key: "wait-a", Period: "2026-W32", NominalTime: t0})
	if err != nil || again.Decision != DecisionReused || again.Episode.ID != "2026-W32-1" {
		t.Fatalf("the retry of the caller that left: %+v, %v; want its committed episode 2026-W32-1 reused", again, err)
	}
}
