package ledger

// A randomized, model-based test of the paid-task state machine
// (paid_tasks.go, decisions.go), registered in runConformance so that both
// drivers run it as Test{SQLite,Postgres}Conformance/PaidStateMachineModel.
//
// From a seed, it applies random calls (WriteIntent, TakeIntent,
// MarkSending, EndSend, ReleaseIntent, RecordSubmission, RecordPaidResult,
// RecordPaidFailure, Decide with every action, RecordStep) by many attempts
// (owners) to the paid steps of one episode, one at a time and in
// concurrent rounds of 2-4 calls, and keeps an in-memory model of what each
// call must do. After every call (or round) it checks:
//
//   - each call's result (task, decision, error kind) and the stored state
//     (paid tasks, cost entries, decisions, step records) equal the model's;
//     a concurrent round must match some order of its calls;
//   - every state change is a move listed in paid_tasks.go's package
//     comment (parsed from the source; TestPaidMovesMatchDocs checks that
//     paidMoves lists the same), and keys, references, results, creation
//     times and request IDs never change once set;
//   - the protocol's promise: within one unanswered window of a task (sends
//     not yet answered by a submission, a definite refusal, or a vendor that
//     said it has nothing), at most one attempt marks sending, unless an
//     operator's resubmit allowed another;
//   - one cost entry per remote reference, booked to the task holding it;
//   - a refused call, or one the model says changes nothing, wrote nothing
//     at all (every row and timestamp as before).
//
// The driver behaves like the activities where the invariant depends on it
// (an attempt sends once, only when it owns the intent and the protocol
// lets it: a fresh intent, a vendor that said it has nothing, or an
// operator's resubmit), and like an adversary elsewhere (non-owners, stale
// views, take-overs while a send may be in flight, foreign keys and
// references, wrong states, invalid and repeated decisions). Times are the
// driver's clock, which moves on with every call; a send's deadline is
// modelSendWindow after it began.
//
// Seeds and length:
//
//	go test ./internal/ledger/ -run 'Conformance/PaidStateMachineModel'                        # CI: seed 1, 500 steps
//	go test ./internal/ledger/ -run 'Conformance/PaidStateMachineModel' -ledger.seed=42        # another seed
//	ALLOT_LEDGER_MODEL_SEED=42 go test ./internal/ledger/ -run 'Conformance/PaidStateMachineModel'
//	ALLOT_LEDGER_MODEL_SEED=random ...                                                # a new seed each run, logged
//	ALLOT_LEDGER_MODEL_STEPS=5000 ALLOT_LEDGER_MODEL_RUNS=20 go test ./internal/ledger/ \
//	    -run 'Conformance/PaidStateMachineModel' -timeout 2h                          # long run: 20 seeds from the seed on
//
// The flag goes after the package (go test passes flags it does not know,
// and everything after them, to the test binary). A failure names the seed
// and the calls that led to it. The sequential steps of a seed replay
// exactly; a concurrent round's calls run in whatever order the database
// gives them, and the model follows that order, so what comes after a
// round may differ from run to run.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"allot"
)

var modelSeedFlag = flag.String("ledger.seed", "", "seed of the paid-task model test: an integer or \"random\" (default $ALLOT_LEDGER_MODEL_SEED, else 1)")

const (
	modelSeedEnv  = "ALLOT_LEDGER_MODEL_SEED"
	modelStepsEnv = "ALLOT_LEDGER_MODEL_STEPS"
	modelRunsEnv  = "ALLOT_LEDGER_MODEL_RUNS"
)

// modelParams reads the seed, the steps per run and the number of runs.
func modelParams(t *testing.T) (seed int64, steps, runs int) {
	t.Helper()
	s := *modelSeedFlag
	if s == "" {
		s = os.Getenv(modelSeedEnv)
	}
	switch s {
	case "":
		seed = 1
	case "random":
		seed = time.Now().UnixNano()
	default:
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("model seed %q is not an integer or \"random\"", s)
		}
	}
	steps, runs = 500, 1
	if raceDetector {
		// The model tests drive the ledger from one goroutine, so under
		// the race detector their depth adds time (about 3 of the race
		// suite's minutes on 2 cores, docs/testing.md) and no race: 100
		// steps there; every other run (the README's command, the
		// mutants) takes the full 500.
		steps = 100
	}
	for _, p := range []struct {
		env string
		v   *int
	}{{modelStepsEnv, &steps}, {modelRunsEnv, &runs}} {
		if v := os.Getenv(p.env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q is not a positive integer", p.env, v)
			}
			*p.v = n
		}
	}
	return seed, steps, runs
}

// docMoveRE matches a move in paid_tasks.go's package comment:
// "//\tplanned   -> intent     WriteIntent: ...".
var docMoveRE = regexp.MustCompile(`^//\s+([a-z]+)\s+->\s+([a-z]+)\s`)

// docMoves parses the moves listed in paid_tasks.go's package comment.
func docMoves(t *testing.T) map[allot.PaidTaskState][]allot.PaidTaskState {
	t.Helper()
	src, err := os.ReadFile("paid_tasks.go")
	if err != nil {
		t.Fatal(err)
	}
	moves := map[allot.PaidTaskState][]allot.PaidTaskState{}
	n := 0
	for _, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "import") {
			break
		}
		if m := docMoveRE.FindStringSubmatch(line); m != nil {
			from, to := allot.PaidTaskState(m[1]), allot.PaidTaskState(m[2])
			moves[from] = append(moves[from], to)
			n++
		}
	}
	if n == 0 {
		t.Fatal("no moves found in paid_tasks.go's package comment")
	}
	return moves
}

// The moves the package comment lists are exactly the moves paidMoves
// allows, so that the model test's check of the documented moves is a check
// of the code's table too.
func TestPaidMovesMatchDocs(t *testing.T) {
	doc := docMoves(t)
	states := []allot.PaidTaskState{allot.PaidPlanned, allot.PaidIntent, allot.PaidSubmitted, allot.PaidSucceeded, allot.PaidFailed, allot.PaidAbandoned}
	for _, s := range states {
		d, c := slices.Clone(doc[s]), slices.Clone(paidMoves[s])
		slices.Sort(d)
		slices.Sort(c)
		if !slices.Equal(d, c) {
			t.Errorf("moves from %s: the package comment lists %v, paidMoves %v", s, d, c)
		}
	}
	for s := range doc {
		if !slices.Contains(states, s) {
			t.Errorf("the package comment lists moves from unknown state %q", s)
		}
	}
	if len(paidMoves) != len(states) {
		t.Errorf("paidMoves has %d states, want %d", len(paidMoves), len(states))
	}
}

// ---- The model -----------------------------------------------------------

type opKind int

const (
	opWriteIntent opKind = iota
	opTakeIntent
	opMarkSending
	opReleaseIntent
	opRecordSubmission
	opRecordResult
	opRecordFailure
	opDecide
	opRecordStep
	opEndSend
	opAskVendor // not a ledger call: the owner asks the vendor, which has nothing for the key
)

// modelSendWindow is how long a send may take: MarkSending's deadline is
// the driver's clock plus this.
const modelSendWindow = 10 * time.Second

// modelOp is one call the driver makes.
type modelOp struct {
	kind      opKind
	ref       PaidTaskRef
	key       string
	owner     string    // WriteIntent, MarkSending, ReleaseIntent, AskVendor; TakeIntent's new owner
	seen      PaidTask  // TakeIntent: the task as the attempt read it
	at        time.Time // TakeIntent, EndSend, AskVendor: the driver's clock
	until     time.Time // MarkSending
	how       string    // TakeIntent: "absent" (the vendor said it has nothing), "unsent", "resubmit", "adversary"
	maybeSent bool      // ReleaseIntent
	sub       Submission
	remote    string // result, failure
	artifact  string
	sha       string
	reason    string
	dec       DecisionRequest
	step      string // RecordStep
}

func (o modelOp) String() string {
	r := fmt.Sprintf("%s/%d", o.ref.Step, o.ref.Revision)
	switch o.kind {
	case opWriteIntent:
		return fmt.Sprintf("WriteIntent(%s, key %q, owner %q)", r, o.key, o.owner)
	case opTakeIntent:
		return fmt.Sprintf("TakeIntent(%s seen owner %q maybe %v until %s, to %q at %s, %s)", r, o.seen.Owner, o.seen.MaybeSent,
			clock(o.seen.SendingUntil), o.owner, clock(o.at), o.how)
	case opMarkSending:
		return fmt.Sprintf("MarkSending(%s, %q, until %s)", r, o.owner, clock(o.until))
	case opEndSend:
		return fmt.Sprintf("EndSend(%s, %q, at %s)", r, o.owner, clock(o.at))
	case opReleaseIntent:
		return fmt.Sprintf("ReleaseIntent(%s, %q, maybeSent %v)", r, o.owner, o.maybeSent)
	case opRecordSubmission:
		return fmt.Sprintf("RecordSubmission(%s, %q, %d %q)", r, o.sub.RemoteRef, o.sub.Amount, o.sub.Currency)
	case opRecordResult:
		return fmt.Sprintf("RecordPaidResult(%s, %q, %q, %q)", r, o.remote, o.artifact, o.sha)
	case opRecordFailure:
		return fmt.Sprintf("RecordPaidFailure(%s, %q, %q)", r, o.remote, o.reason)
	case opDecide:
		d := o.dec
		return fmt.Sprintf("Decide(%q %q step %q ref %q adopted %q/%d reason %q reset %q)",
			d.RequestID, d.Action, d.Step, d.RemoteRef, d.Adopted.RemoteRef, d.Adopted.Amount, d.Reason, d.Reset)
	case opRecordStep:
		return fmt.Sprintf("RecordStep(%s)", o.step)
	case opAskVendor:
		return fmt.Sprintf("AskVendor(%s) by %q at %s: nothing there", r, o.owner, clock(o.at))
	}
	return "?"
}

func (o modelOp) kindName() string {
	switch o.kind {
	case opDecide:
		return "Decide " + string(o.dec.Action)
	case opTakeIntent:
		return "TakeIntent " + o.how
	}
	name, _, _ := strings.Cut(o.String(), "(")
	return name
}

func resultName(r opResult) string {
	switch {
	case r.err != "":
		return r.err
	case r.dec.RequestID != "" && !r.applied:
		return "stored"
	}
	return "ok"
}

// clock shows a model time as seconds after t0.
func clock(at time.Time) string {
	if at.IsZero() {
		return "-"
	}
	return fmt.Sprintf("t0%+gs", at.Sub(t0).Seconds())
}

// opResult is what a call returned, timestamps cleared.
type opResult struct {
	task    PaidTask
	dec     OperatorDecision
	applied bool
	err     string // errKind
}

func (r opResult) String() string {
	if r.err != "" {
		return "error " + r.err
	}
	if r.dec.RequestID != "" {
		return fmt.Sprintf("decision %+v applied %v", r.dec, r.applied)
	}
	return fmt.Sprintf("task %+v", r.task)
}

// errKind names the error a call returned by the sentinel it wraps.
func errKind(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrInvalidInput):
		return "invalid"
	case errors.Is(err, ErrEpisodeNotFound):
		return "episode"
	case errors.Is(err, ErrPaidTaskNotFound):
		return "notfound"
	case errors.Is(err, ErrIntentOwned):
		return "owned"
	case errors.Is(err, ErrSendInFlight):
		return "inflight"
	case errors.Is(err, ErrRemoteRefConflict):
		return "conflict"
	case errors.Is(err, ErrPaidTaskState):
		return "state"
	}
	return "other: " + err.Error()
}

func bare(t PaidTask) PaidTask {
	t.CreatedAt, t.UpdatedAt = time.Time{}, time.Time{}
	if !t.FirstSentAt.IsZero() {
		t.FirstSentAt = modelSent // the model knows whether, not when
	}
	return t
}

// modelSent stands for a task's FirstSentAt in the model: set or not.
var modelSent = time.Unix(1, 0).UTC()

func bareDecision(d OperatorDecision) OperatorDecision {
	d.At = time.Time{}
	return d
}

// modelCost is a cost entry as the model keeps it.
type modelCost struct {
	task     PaidTaskRef
	amount   int64
	currency string
}

// modelStep is a step record as the model keeps it.
type modelStep struct {
	status   allot.StepStatus
	revision int
}

// setStep records a step's status at revision 0, which never takes a step
// back from the revision it is at.
func (m *paidModel) setStep(step string, status allot.StepStatus) {
	st := m.steps[step]
	st.status = status
	m.steps[step] = st
}

// paidModel is what the ledger should hold for one episode, and the
// protocol's bookkeeping.
type paidModel struct {
	pipeline, episode string
	tasks             map[PaidTaskRef]PaidTask // timestamps cleared
	costs             map[string]modelCost
	decisions         map[string]OperatorDecision // by request ID, At cleared
	steps             map[string]modelStep
	// window holds, per task, the attempts whose send is unanswered, with
	// the send's deadline.
	window map[PaidTaskRef]map[string]time.Time
	// spent: attempts that have marked sending (an attempt sends once);
	// cleared: attempts the protocol lets send now.
	spent, cleared map[string]bool
	violations     []string
}

func newPaidModel(ep Episode) *paidModel {
	return &paidModel{
		pipeline: ep.Pipeline, episode: ep.ID,
		tasks: map[PaidTaskRef]PaidTask{}, costs: map[string]modelCost{}, decisions: map[string]OperatorDecision{},
		steps: map[string]modelStep{}, window: map[PaidTaskRef]map[string]time.Time{},
		spent: map[string]bool{}, cleared: map[string]bool{},
	}
}

func (m *paidModel) clone() *paidModel {
	c := *m
	c.tasks, c.costs, c.decisions, c.steps = maps.Clone(m.tasks), maps.Clone(m.costs), maps.Clone(m.decisions), maps.Clone(m.steps)
	c.window = map[PaidTaskRef]map[string]time.Time{}
	for r, w := range m.window {
		c.window[r] = maps.Clone(w)
	}
	c.spent, c.cleared = maps.Clone(m.spent), maps.Clone(m.cleared)
	c.violations = slices.Clone(m.violations)
	return &c
}

// sameState reports whether two models hold the same ledger state.
func (m *paidModel) sameState(o *paidModel) bool {
	return maps.Equal(m.tasks, o.tasks) && maps.Equal(m.costs, o.costs) && maps.Equal(m.decisions, o.decisions) && maps.Equal(m.steps, o.steps)
}

func (m *paidModel) ref(step string, rev int) PaidTaskRef {
	return PaidTaskRef{Pipeline: m.pipeline, EpisodeID: m.episode, Step: step, Revision: rev}
}

func (m *paidModel) latest(step string) (PaidTask, bool) {
	var out PaidTask
	found := false
	for r, t := range m.tasks {
		if r.Step == step && (!found || r.Revision > out.Revision) {
			out, found = t, true
		}
	}
	return out, found
}

func (m *paidModel) clearWindow(r PaidTaskRef) { delete(m.window, r) }

// vendorSaysAbsent settles the sends of r that were over at at: the vendor
// has nothing for the key, so none of them reached it.
func (m *paidModel) vendorSaysAbsent(r PaidTaskRef, at time.Time) {
	for a, until := range m.window[r] {
		if !at.Before(until) {
			delete(m.window[r], a)
		}
	}
}

// apply does to the model what the call must do to the ledger and returns
// what the call must return.
func (m *paidModel) apply(o modelOp) opResult {
	fail := func(kind string) opResult { return opResult{err: kind} }
	t, ok := m.tasks[o.ref]
	switch o.kind {
	case opAskVendor:
		// The protocol asks only once the last send is over.
		if ok && t.State == allot.PaidIntent && t.Owner == o.owner && !(t.MaybeSent && o.at.Before(t.SendingUntil)) {
			m.vendorSaysAbsent(o.ref, o.at)
			m.cleared[o.owner] = true
		}
		return opResult{}

	case opRecordStep:
		m.setStep(o.step, allot.StepCompleted)
		return opResult{}

	case opWriteIntent:
		if o.key == "" || o.owner == "" {
			return fail("invalid")
		}
		if ok && t.IdempotencyKey != "" && t.IdempotencyKey != o.key {
			return fail("invalid")
		}
		if ok && t.State != allot.PaidPlanned {
			return opResult{task: t}
		}
		for r, other := range m.tasks {
			if r != o.ref && other.IdempotencyKey == o.key {
				return fail("invalid")
			}
		}
		if !ok {
			t = PaidTask{PaidTaskRef: o.ref}
		}
		t.IdempotencyKey, t.State, t.Owner = o.key, allot.PaidIntent, o.owner
		m.tasks[o.ref] = t
		m.cleared[o.owner] = !t.MaybeSent || t.ResubmitRequest != ""
		return opResult{task: t}

	case opTakeIntent:
		switch {
		case o.owner == "":
			return fail("invalid")
		case !ok:
			return fail("notfound")
		case t.State != allot.PaidIntent:
			return fail("state")
		case t.Owner == o.owner:
			return opResult{task: t}
		case t.Owner != o.seen.Owner || t.MaybeSent != o.seen.MaybeSent || !t.SendingUntil.Equal(o.seen.SendingUntil):
			return fail("owned")
		case t.MaybeSent && o.at.Before(t.SendingUntil):
			return fail("inflight")
		}
		t.Owner = o.owner
		m.tasks[o.ref] = t
		switch o.how {
		case "absent":
			m.vendorSaysAbsent(o.ref, o.at)
			m.cleared[o.owner] = true
		case "unsent", "resubmit":
			m.cleared[o.owner] = true
		}
		return opResult{task: t}

	case opMarkSending:
		switch {
		case o.until.IsZero():
			return fail("invalid")
		case !ok:
			return fail("notfound")
		case t.State != allot.PaidIntent:
			return fail("state")
		case t.Owner != o.owner:
			return fail("owned")
		}
		others := 0
		for a := range m.window[o.ref] {
			if a != o.owner {
				others++
			}
		}
		if others > 0 && t.ResubmitRequest == "" {
			m.violations = append(m.violations, fmt.Sprintf("%s: attempt %q marked sending while %d other send(s) were unanswered, without a resubmit: %v",
				describe(o.ref), o.owner, others, slices.Sorted(maps.Keys(m.window[o.ref]))))
		}
		t.MaybeSent, t.SendingUntil, t.ResubmitRequest = true, o.until, ""
		t.FirstSentAt = modelSent
		m.tasks[o.ref] = t
		if m.window[o.ref] == nil {
			m.window[o.ref] = map[string]time.Time{}
		}
		m.window[o.ref][o.owner] = o.until
		m.spent[o.owner] = true
		return opResult{task: t}

	case opEndSend:
		if !ok {
			return fail("notfound")
		}
		if t.State == allot.PaidIntent && t.Owner == o.owner && t.MaybeSent && o.at.Before(t.SendingUntil) {
			t.SendingUntil = o.at
			m.tasks[o.ref] = t
			if _, sent := m.window[o.ref][o.owner]; sent {
				m.window[o.ref][o.owner] = o.at
			}
		}
		return opResult{task: t}

	case opReleaseIntent:
		switch {
		case !ok:
			return fail("notfound")
		case t.State != allot.PaidIntent:
			return fail("state")
		case t.Owner != o.owner:
			return fail("owned")
		}
		t.State, t.Owner, t.MaybeSent = allot.PaidPlanned, "", o.maybeSent
		m.tasks[o.ref] = t
		if o.maybeSent {
			delete(m.window[o.ref], o.owner)
		} else {
			m.clearWindow(o.ref)
		}
		return opResult{task: t}

	case opRecordSubmission:
		s := o.sub
		switch {
		case s.RemoteRef == "", s.Currency == "" && s.Amount != 0, s.Amount < 0:
			return fail("invalid")
		case !ok:
			return fail("notfound")
		}
		if kind := m.submit(&t, s); kind != "" {
			return fail(kind)
		}
		return opResult{task: t}

	case opRecordResult:
		switch {
		case o.remote == "" || o.artifact == "" || o.sha == "":
			return fail("invalid")
		case !ok:
			return fail("notfound")
		case t.State != allot.PaidSubmitted && t.State != allot.PaidSucceeded:
			return fail("state")
		case t.RemoteRef != o.remote:
			return fail("conflict")
		case t.State == allot.PaidSucceeded && (t.Artifact != o.artifact || t.SHA256 != o.sha):
			return fail("state")
		}
		t.State, t.Artifact, t.SHA256 = allot.PaidSucceeded, o.artifact, o.sha
		m.tasks[o.ref] = t
		return opResult{task: t}

	case opRecordFailure:
		switch {
		case o.remote == "" || o.reason == "":
			return fail("invalid")
		case !ok:
			return fail("notfound")
		case t.State != allot.PaidSubmitted && t.State != allot.PaidFailed:
			return fail("state")
		case t.RemoteRef != o.remote:
			return fail("conflict")
		}
		if t.State == allot.PaidSubmitted {
			t.State, t.Error = allot.PaidFailed, o.reason
		}
		m.tasks[o.ref] = t
		return opResult{task: t}

	case opDecide:
		return m.decide(o.dec)
	}
	panic("unknown op")
}

// submit is recordSubmissionTx on the model: t is the stored task.
func (m *paidModel) submit(t *PaidTask, s Submission) string {
	switch t.State {
	case allot.PaidIntent, allot.PaidSubmitted, allot.PaidSucceeded, allot.PaidFailed:
	default:
		return "state"
	}
	if t.RemoteRef != "" && t.RemoteRef != s.RemoteRef {
		return "conflict"
	}
	for r, other := range m.tasks {
		if r != t.PaidTaskRef && other.RemoteRef == s.RemoteRef {
			return "conflict"
		}
	}
	if c, ok := m.costs[s.RemoteRef]; ok && c.task != t.PaidTaskRef {
		return "conflict"
	}
	t.RemoteRef = s.RemoteRef
	if t.State == allot.PaidIntent {
		t.State, t.Owner, t.MaybeSent, t.ResubmitRequest = allot.PaidSubmitted, "", false, ""
		m.clearWindow(t.PaidTaskRef)
	}
	m.tasks[t.PaidTaskRef] = *t
	if s.Currency != "" {
		m.costs[s.RemoteRef] = modelCost{task: t.PaidTaskRef, amount: s.Amount, currency: s.Currency}
	}
	return ""
}

func (m *paidModel) decide(r DecisionRequest) opResult {
	d := r.OperatorDecision
	fail := func(kind string) opResult { return opResult{err: kind} }
	switch {
	case d.RequestID == "", !slices.Contains(allot.Actions, d.Action):
		return fail("invalid")
	case d.Step == "" && (d.Action.StepAction() || d.Action == allot.ActionApprove || d.Action == allot.ActionReject):
		return fail("invalid")
	case d.Action == allot.ActionAdopt && (d.RemoteRef == "" || r.Adopted.RemoteRef != d.RemoteRef):
		return fail("invalid")
	case d.Action == allot.ActionAbandon && d.Reason == "":
		return fail("invalid")
	case slices.Contains(r.Reset, ""):
		return fail("invalid")
	}
	if stored, ok := m.decisions[d.RequestID]; ok {
		return opResult{dec: stored}
	}
	// Applied to a copy: a refusal leaves the model as it was.
	c := m.clone()
	rev, kind := c.applyDecision(r)
	if kind != "" {
		return fail(kind)
	}
	for _, s := range r.Reset {
		st, ok := c.steps[s]
		st.status, st.revision = allot.StepReset, st.revision+1
		if !ok {
			st.revision = 1
		}
		c.steps[s] = st
	}
	d.Revision, d.At = rev, time.Time{}
	c.decisions[d.RequestID] = d
	*m = *c
	return opResult{dec: d, applied: true}
}

func (m *paidModel) applyDecision(r DecisionRequest) (int, string) {
	d := r.OperatorDecision
	switch d.Action {
	case allot.ActionApprove, allot.ActionReject:
		m.setStep(d.Step, allot.StepApproved)
		if d.Action == allot.ActionReject {
			m.setStep(d.Step, allot.StepRejected)
		}
		return 0, ""
	case allot.ActionReassemble:
		return 0, ""
	case allot.ActionRework:
		for ref, t := range m.tasks {
			if ref.Step == d.Step && (t.State == allot.PaidPlanned || t.State == allot.PaidIntent || t.State == allot.PaidSubmitted) {
				return 0, "state"
			}
		}
		rev := 0
		if latest, ok := m.latest(d.Step); ok {
			rev = latest.Revision + 1
		}
		ref := m.ref(d.Step, rev)
		m.tasks[ref] = PaidTask{PaidTaskRef: ref, State: allot.PaidPlanned, RequestID: d.RequestID}
		return rev, ""
	}
	t, ok := m.latest(d.Step)
	if !ok {
		return 0, "notfound"
	}
	switch d.Action {
	case allot.ActionRetry:
	case allot.ActionAdopt:
		if t.State != allot.PaidIntent {
			return 0, "state"
		}
		s := r.Adopted
		s.PaidTaskRef = t.PaidTaskRef
		if kind := m.submit(&t, s); kind != "" {
			return 0, kind
		}
	case allot.ActionResubmit:
		if t.State != allot.PaidIntent {
			return 0, "state"
		}
		t.ResubmitRequest = d.RequestID
		m.tasks[t.PaidTaskRef] = t
	case allot.ActionAbandon:
		switch t.State {
		case allot.PaidPlanned, allot.PaidIntent, allot.PaidSubmitted, allot.PaidFailed:
		default:
			return 0, "state"
		}
		t.State, t.Error, t.Owner, t.ResubmitRequest = allot.PaidAbandoned, d.Reason, "", ""
		m.tasks[t.PaidTaskRef] = t
		m.clearWindow(t.PaidTaskRef)
	}
	return t.Revision, ""
}

// ---- Running calls and reading the ledger --------------------------------

func (o modelOp) run(ctx context.Context, l *Ledger) opResult {
	var (
		t   PaidTask
		err error
	)
	switch o.kind {
	case opAskVendor:
		return opResult{}
	case opRecordStep:
		err = l.RecordStep(ctx, StepRecord{Pipeline: o.ref.Pipeline, EpisodeID: o.ref.EpisodeID, Step: o.step, Status: allot.StepCompleted})
		return opResult{err: errKind(err)}
	case opWriteIntent:
		t, err = l.WriteIntent(ctx, o.ref, o.key, o.owner)
	case opTakeIntent:
		seen := o.seen
		seen.PaidTaskRef = o.ref
		t, err = l.TakeIntent(ctx, seen, o.owner, o.at)
	case opMarkSending:
		t, err = l.MarkSending(ctx, o.ref, o.owner, o.until)
	case opEndSend:
		t, err = l.EndSend(ctx, o.ref, o.owner, o.at)
	case opReleaseIntent:
		t, err = l.ReleaseIntent(ctx, o.ref, o.owner, o.maybeSent)
	case opRecordSubmission:
		t, err = l.RecordSubmission(ctx, o.sub)
	case opRecordResult:
		t, err = l.RecordPaidResult(ctx, o.ref, o.remote, o.artifact, o.sha)
	case opRecordFailure:
		t, err = l.RecordPaidFailure(ctx, o.ref, o.remote, o.reason)
	case opDecide:
		d, applied, err := l.Decide(ctx, o.dec)
		return opResult{dec: bareDecision(d), applied: applied, err: errKind(err)}
	}
	return opResult{task: bare(t), err: errKind(err)}
}

// observed is the ledger's state for the model's episode.
type observed struct {
	tasks     []PaidTask // with timestamps
	model     *paidModel // the same state in the model's form
	dump      map[string][]string
	costsSeen []CostEntry
}

func observe(ctx context.Context, t *testing.T, l *Ledger, m *paidModel) observed {
	t.Helper()
	ts, err := l.PaidTasks(ctx, m.pipeline, m.episode)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := l.Costs(ctx, m.pipeline, "")
	if err != nil {
		t.Fatal(err)
	}
	ds, err := l.Decisions(ctx, m.pipeline, m.episode)
	if err != nil {
		t.Fatal(err)
	}
	steps, err := l.Steps(ctx, m.pipeline, m.episode)
	if err != nil {
		t.Fatal(err)
	}
	got := newPaidModel(Episode{Pipeline: m.pipeline, ID: m.episode})
	for _, pt := range ts {
		got.tasks[pt.PaidTaskRef] = bare(pt)
	}
	var mine []CostEntry
	for _, c := range cs {
		if c.EpisodeID != m.episode {
			continue
		}
		mine = append(mine, c)
		if _, dup := got.costs[c.RemoteRef]; dup {
			t.Fatalf("two cost entries for remote reference %q", c.RemoteRef)
		}
		got.costs[c.RemoteRef] = modelCost{task: PaidTaskRef{Pipeline: c.Pipeline, EpisodeID: c.EpisodeID, Step: c.Step, Revision: c.Revision}, amount: c.Amount, currency: c.Currency}
	}
	for _, d := range ds {
		got.decisions[d.RequestID] = bareDecision(d)
	}
	for _, s := range steps {
		got.steps[s.Step] = modelStep{status: s.Status, revision: s.Revision}
	}
	return observed{tasks: ts, model: got, dump: dumpEpisodeTables(ctx, t, l, m.pipeline, m.episode), costsSeen: mine}
}

// stateDiff describes how the observed state differs from the model's.
func stateDiff(want, got *paidModel) string {
	var b strings.Builder
	for _, r := range sortedRefs(want.tasks, got.tasks) {
		w, wok := want.tasks[r]
		g, gok := got.tasks[r]
		if w != g || wok != gok {
			fmt.Fprintf(&b, "\n  %s/%d: model %+v (exists %v)\n  %*s ledger %+v (exists %v)", r.Step, r.Revision, w, wok, len(r.Step)+4, "", g, gok)
		}
	}
	if !maps.Equal(want.costs, got.costs) {
		fmt.Fprintf(&b, "\n  costs: model %+v\n         ledger %+v", want.costs, got.costs)
	}
	if !maps.Equal(want.decisions, got.decisions) {
		fmt.Fprintf(&b, "\n  decisions: model %+v\n             ledger %+v", want.decisions, got.decisions)
	}
	if !maps.Equal(want.steps, got.steps) {
		fmt.Fprintf(&b, "\n  steps: model %v, ledger %v", want.steps, got.steps)
	}
	return b.String()
}

func sortedRefs(ms ...map[PaidTaskRef]PaidTask) []PaidTaskRef {
	seen := map[PaidTaskRef]bool{}
	for _, m := range ms {
		for r := range m {
			seen[r] = true
		}
	}
	out := slices.Collect(maps.Keys(seen))
	sort.Slice(out, func(i, j int) bool {
		if out[i].Step != out[j].Step {
			return out[i].Step < out[j].Step
		}
		return out[i].Revision < out[j].Revision
	})
	return out
}

// reachable reports whether to can be reached from from by documented moves.
func reachable(moves map[allot.PaidTaskState][]allot.PaidTaskState, from, to allot.PaidTaskState) bool {
	seen := map[allot.PaidTaskState]bool{from: true}
	queue := []allot.PaidTaskState{from}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, n := range moves[s] {
			if n == to {
				return true
			}
			if !seen[n] {
				seen[n] = true
				queue = append(queue, n)
			}
		}
	}
	return false
}

// checkTransition checks the change from prev to cur against the documented
// moves and the fields that never change once set. single: one call was
// made, so each task moved at most once.
func checkTransition(moves map[allot.PaidTaskState][]allot.PaidTaskState, prev, cur observed, single bool) []string {
	var bad []string
	before := map[PaidTaskRef]PaidTask{}
	for _, t := range prev.tasks {
		before[t.PaidTaskRef] = t
	}
	after := map[PaidTaskRef]PaidTask{}
	for _, t := range cur.tasks {
		after[t.PaidTaskRef] = t
	}
	for r, b := range before {
		a, ok := after[r]
		name := fmt.Sprintf("%s/%d", r.Step, r.Revision)
		switch {
		case !ok:
			bad = append(bad, name+" disappeared")
			continue
		case a.State != b.State:
			if single && !slices.Contains(moves[b.State], a.State) {
				bad = append(bad, fmt.Sprintf("%s moved %s -> %s, which paid_tasks.go does not list", name, b.State, a.State))
			}
			if !single && !reachable(moves, b.State, a.State) {
				bad = append(bad, fmt.Sprintf("%s moved %s -> %s, which no documented moves reach", name, b.State, a.State))
			}
		case a.Owner != b.Owner && a.State != allot.PaidIntent:
			bad = append(bad, fmt.Sprintf("%s changed owner %q -> %q while %s", name, b.Owner, a.Owner, a.State))
		case a.Owner != b.Owner && !slices.Contains(moves[allot.PaidIntent], allot.PaidIntent):
			bad = append(bad, fmt.Sprintf("%s changed owner while intent, but intent -> intent is not a documented move", name))
		}
		for _, f := range []struct{ what, b, a string }{
			{"idempotency key", b.IdempotencyKey, a.IdempotencyKey},
			{"remote reference", b.RemoteRef, a.RemoteRef},
			{"artifact", b.Artifact, a.Artifact},
			{"sha256", b.SHA256, a.SHA256},
			{"request ID", b.RequestID, a.RequestID},
		} {
			if f.b != "" && f.a != f.b {
				bad = append(bad, fmt.Sprintf("%s changed its %s from %q to %q", name, f.what, f.b, f.a))
			}
		}
		if !a.CreatedAt.Equal(b.CreatedAt) {
			bad = append(bad, name+" changed its creation time")
		}
		if !b.FirstSentAt.IsZero() && !a.FirstSentAt.Equal(b.FirstSentAt) {
			bad = append(bad, name+" changed its first send's time")
		}
		if a.UpdatedAt.Before(b.UpdatedAt) {
			bad = append(bad, name+" went back in time")
		}
	}
	for r, a := range after {
		if _, ok := before[r]; ok {
			continue
		}
		created := a.State == allot.PaidIntent || a.State == allot.PaidPlanned
		if !single && !created {
			// Created and moved on within one round.
			created = reachable(moves, allot.PaidIntent, a.State) || reachable(moves, allot.PaidPlanned, a.State)
		}
		if !created {
			bad = append(bad, fmt.Sprintf("%s/%d was created %s, not intent or planned", r.Step, r.Revision, a.State))
		}
	}
	// One cost entry per remote reference, booked to the task that holds it.
	for _, c := range cur.costsSeen {
		t, ok := after[PaidTaskRef{Pipeline: c.Pipeline, EpisodeID: c.EpisodeID, Step: c.Step, Revision: c.Revision}]
		if !ok || t.RemoteRef != c.RemoteRef {
			bad = append(bad, fmt.Sprintf("cost entry %q is booked to %s/%d, which holds %q", c.RemoteRef, c.Step, c.Revision, t.RemoteRef))
		}
	}
	return bad
}

// ---- The driver -----------------------------------------------------------

var (
	modelPaidSteps  = []string{"render", "voice"}
	modelLocalSteps = []string{"assemble", "publish"}
)

type modelDriver struct {
	rng      *rand.Rand
	n        int       // counter for fresh names
	requests []string  // request IDs used so far
	now      time.Time // the driver's clock: the time calls are made at
}

// tick moves the driver's clock on, sometimes past a whole send window.
func (g *modelDriver) tick() {
	g.now = g.now.Add(time.Duration(1+g.rng.IntN(3)) * time.Second)
	if g.pct(10) {
		g.now = g.now.Add(modelSendWindow)
	}
}

func (g *modelDriver) fresh(prefix string) string {
	g.n++
	return fmt.Sprintf("%s%d", prefix, g.n)
}

func (g *modelDriver) pct(p int) bool { return g.rng.IntN(100) < p }

func pick[T any](g *modelDriver, xs []T) T { return xs[g.rng.IntN(len(xs))] }

// vendorRef is the reference the vendor gives a task.
func vendorRef(r PaidTaskRef) string {
	return fmt.Sprintf("vr-%s-%s-%d", r.EpisodeID, r.Step, r.Revision)
}

// pickRef picks a task: mostly a step's latest revision (revision 0 if it
// has none), sometimes an older one or one past the latest.
func (g *modelDriver) pickRef(m *paidModel) PaidTaskRef {
	step := pick(g, modelPaidSteps)
	latest, ok := m.latest(step)
	if !ok {
		return m.ref(step, 0)
	}
	switch {
	case g.pct(10) && latest.Revision > 0:
		return m.ref(step, g.rng.IntN(latest.Revision))
	case g.pct(4):
		return m.ref(step, latest.Revision+1)
	}
	return latest.PaidTaskRef
}

// otherRef picks a task of another step than r's.
func (g *modelDriver) otherRef(m *paidModel, r PaidTaskRef) PaidTaskRef {
	for range 10 {
		o := g.pickRef(m)
		if o.Step != r.Step {
			return o
		}
	}
	return m.ref("voice", 0)
}

// modelWeights weighs the calls by the state of the task they are made on
// (no task: ""), in opKind order: mostly what the protocol would do next,
// with every other call now and then.
var modelWeights = map[allot.PaidTaskState][]int{
	//                  Write Take Mark Release Submit Result Failure Decide Step EndSend Ask
	"":                  {50, 3, 3, 3, 3, 3, 3, 25, 4, 3, 0},
	allot.PaidPlanned:   {45, 4, 4, 4, 4, 3, 3, 25, 4, 4, 0},
	allot.PaidIntent:    {10, 16, 20, 10, 8, 2, 2, 10, 3, 8, 11},
	allot.PaidSubmitted: {5, 3, 3, 3, 10, 30, 20, 20, 3, 3, 0},
	allot.PaidSucceeded: {5, 3, 3, 3, 5, 8, 5, 60, 4, 4, 0},
	allot.PaidFailed:    {5, 3, 3, 3, 5, 8, 5, 60, 4, 4, 0},
	allot.PaidAbandoned: {5, 3, 3, 3, 5, 8, 5, 60, 4, 4, 0},
}

func (g *modelDriver) kind(state allot.PaidTaskState, concurrent bool) opKind {
	ws := slices.Clone(modelWeights[state])
	if concurrent {
		ws[opAskVendor] = 0 // it acts on the state the round started from
	}
	n := g.rng.IntN(sumInts(ws))
	for k, w := range ws {
		if n < w {
			return opKind(k)
		}
		n -= w
	}
	panic("unreachable")
}

func sumInts(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

// next generates a call. concurrent: the call runs in a round with others,
// so it must not rely on the state staying as it is now.
func (g *modelDriver) next(m *paidModel, concurrent bool) modelOp {
	r := g.pickRef(m)
	t, exists := m.tasks[r]
	intent := exists && t.State == allot.PaidIntent
	o := modelOp{ref: r, kind: g.kind(t.State, concurrent)}
	switch o.kind {
	case opWriteIntent:
		o.key = testKey(r)
		if exists && t.IdempotencyKey != "" && g.pct(10) {
			o.key = pick(g, []string{"bogus-" + g.fresh("k"), testKey(g.otherRef(m, r))})
		}
		o.owner = g.fresh("att-")
		if intent && g.pct(15) {
			o.owner = t.Owner // the same attempt retried
		}
		if g.pct(2) {
			o.owner = ""
		}
	case opTakeIntent:
		// The attempt read t, asked the vendor (or could not), and takes
		// over as the protocol lets it: the vendor said it has nothing, or
		// nothing was sent, or an operator allowed a send.
		o.owner, o.seen, o.at, o.how = g.fresh("att-"), t, g.now, "absent"
		switch {
		case !intent || g.pct(25):
			o.how = "adversary"
			switch g.rng.IntN(4) {
			case 0:
				o.seen.Owner = g.fresh("intruder-")
			case 1:
				o.seen.MaybeSent = !o.seen.MaybeSent
			case 2:
				o.seen.SendingUntil = g.now.Add(-time.Second)
			default:
				o.at = t.SendingUntil.Add(-time.Second) // before the last send is over
			}
		case t.ResubmitRequest != "" && g.pct(50):
			o.how = "resubmit"
		case !t.MaybeSent && g.pct(50):
			o.how = "unsent"
		}
	case opAskVendor:
		o.owner, o.at = t.Owner, g.now
	case opMarkSending:
		o.until = g.now.Add(modelSendWindow)
		if intent && m.cleared[t.Owner] && !m.spent[t.Owner] && g.pct(75) {
			o.owner = t.Owner
		} else {
			o.owner = g.fresh("intruder-")
		}
	case opEndSend:
		// The owner's request failed on its side: its send is over.
		o.owner, o.at = t.Owner, g.now
		if !intent || g.pct(25) {
			o.owner = g.fresh("intruder-")
		}
	case opReleaseIntent:
		if intent && m.spent[t.Owner] && g.pct(75) {
			o.owner = t.Owner
			_, own := m.window[r][t.Owner]
			others := len(m.window[r]) > 1 || len(m.window[r]) == 1 && !own
			o.maybeSent = others || g.pct(50)
		} else {
			o.owner, o.maybeSent = g.fresh("intruder-"), g.pct(50)
		}
	case opRecordSubmission:
		o.sub = Submission{PaidTaskRef: r, RemoteRef: vendorRef(r), Amount: int64(1 + g.rng.IntN(999)), Currency: "EUR"}
		switch {
		case g.pct(8):
			o.sub.RemoteRef = vendorRef(g.otherRef(m, r))
		case g.pct(3):
			o.sub.RemoteRef = g.fresh("vr-bogus-" + r.EpisodeID + "-")
		}
		switch {
		case g.pct(10):
			o.sub.Amount, o.sub.Currency = 0, "" // an effect step
		case g.pct(3):
			o.sub.Amount, o.sub.Currency = 5, ""
		case g.pct(2):
			o.sub.Amount = -1
		}
	case opRecordResult:
		o.remote, o.artifact, o.sha = t.RemoteRef, "/a/"+r.Step, "sha-"+vendorRef(r)
		if o.remote == "" || g.pct(8) {
			o.remote = vendorRef(g.otherRef(m, r))
		}
		if g.pct(15) {
			o.sha = g.fresh("sha-other-")
		}
	case opRecordFailure:
		o.remote, o.reason = t.RemoteRef, g.fresh("vendor failure ")
		if o.remote == "" || g.pct(8) {
			o.remote = vendorRef(g.otherRef(m, r))
		}
	case opDecide:
		o.dec = g.decision(m, r)
	case opRecordStep:
		o.step = pick(g, modelLocalSteps)
	}
	return o
}

// modelActions are the actions an operator takes in each state of a step's
// latest revision (none: ""); any action is tried now and then.
var modelActions = map[allot.PaidTaskState][]allot.Action{
	"":                  {allot.ActionRework},
	allot.PaidPlanned:   {allot.ActionRetry, allot.ActionAbandon},
	allot.PaidIntent:    {allot.ActionAdopt, allot.ActionResubmit, allot.ActionRetry, allot.ActionAbandon},
	allot.PaidSubmitted: {allot.ActionRetry, allot.ActionAbandon},
	allot.PaidSucceeded: {allot.ActionRework},
	allot.PaidFailed:    {allot.ActionRework, allot.ActionAbandon},
	allot.PaidAbandoned: {allot.ActionRework},
}

func (g *modelDriver) decision(m *paidModel, r PaidTaskRef) DecisionRequest {
	latest, _ := m.latest(r.Step)
	action := pick(g, allot.Actions)
	if g.pct(70) {
		action = pick(g, modelActions[latest.State])
	}
	d := DecisionRequest{OperatorDecision: OperatorDecision{Pipeline: m.pipeline, EpisodeID: m.episode, Step: r.Step, Action: action}}
	switch {
	case g.pct(12) && len(g.requests) > 0:
		d.RequestID = pick(g, g.requests)
	case g.pct(1):
		d.RequestID = ""
	default:
		d.RequestID = g.fresh("req-")
	}
	if d.RequestID != "" {
		g.requests = append(g.requests, d.RequestID)
	}
	if g.pct(2) {
		d.Action = "Approve"
	}
	switch d.Action {
	case allot.ActionApprove, allot.ActionReject:
		d.Step = "approval"
	case allot.ActionReassemble:
		d.Step = ""
	}
	if g.pct(2) {
		d.Step = ""
	}
	switch d.Action {
	case allot.ActionAbandon:
		d.Reason = g.fresh("operator reason ")
		if g.pct(8) {
			d.Reason = ""
		}
	case allot.ActionAdopt:
		d.RemoteRef = vendorRef(latest.PaidTaskRef)
		if g.pct(8) {
			d.RemoteRef = vendorRef(g.otherRef(m, r))
		}
		d.Adopted = Submission{RemoteRef: d.RemoteRef, Amount: int64(g.rng.IntN(500)), Currency: "EUR"}
		switch {
		case g.pct(10):
			d.Adopted.Amount, d.Adopted.Currency = 0, ""
		case g.pct(4):
			d.Adopted.RemoteRef = "vr-not-verified"
		}
	case allot.ActionRework, allot.ActionReassemble:
		for _, s := range append(slices.Clone(modelLocalSteps), "approval") {
			if g.pct(40) {
				d.Reset = append(d.Reset, s)
			}
		}
		if g.pct(3) {
			d.Reset = append(d.Reset, "")
		}
	}
	return d
}

// ---- The test -------------------------------------------------------------

func testPaidStateMachineModel(t *testing.T, l *Ledger) {
	seed, steps, runs := modelParams(t)
	moves := docMoves(t)
	for run := range runs {
		s := seed + int64(run)
		ep := alloc(t, l, "model", fmt.Sprintf("seed-%d", s), "2026-W32", 0).Episode
		if !runPaidModel(t, l, ep, s, steps, moves) {
			return
		}
	}
	mustCheckClean(t, l, "")
}

// runPaidModel runs one seed; false if it failed.
func runPaidModel(t *testing.T, l *Ledger, ep Episode, seed int64, steps int, moves map[allot.PaidTaskState][]allot.PaidTaskState) bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := &modelDriver{rng: rand.New(rand.NewPCG(uint64(seed), 0x616c6c6f74)), now: t0}
	m := newPaidModel(ep)
	var trace []string
	stats := map[string]int{} // "call -> result": how often, to see what a seed covered
	failf := func(format string, args ...any) bool {
		t.Helper()
		from := max(0, len(trace)-40)
		t.Errorf("seed %d (rerun with -ledger.seed=%d), after %d calls: %s\nlast calls:\n  %s",
			seed, seed, len(trace), fmt.Sprintf(format, args...), strings.Join(trace[from:], "\n  "))
		return false
	}
	prev := observe(ctx, t, l, m)
	for step := 0; step < steps; step++ {
		g.tick()
		if g.pct(20) {
			// A concurrent round: calls chosen on the same state, run at once.
			k := 2 + g.rng.IntN(3)
			ops := make([]modelOp, k)
			for i := range ops {
				ops[i] = g.next(m, true)
			}
			got := make([]opResult, k)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range ops {
				wg.Go(func() {
					<-start
					got[i] = ops[i].run(ctx, l)
				})
			}
			close(start)
			wg.Wait()
			for i := range ops {
				trace = append(trace, fmt.Sprintf("[round %d] %s -> %s", step, ops[i], got[i]))
				stats[ops[i].kindName()+" -> "+resultName(got[i])]++
				if strings.HasPrefix(got[i].err, "other") {
					return failf("%s failed: %s", ops[i], got[i].err)
				}
			}
			cur := observe(ctx, t, l, m)
			next, order, bad := linearize(m, ops, got, cur.model)
			if next == nil {
				return failf("no order of the round's calls gives their results and the stored state%s", bad)
			}
			trace = append(trace, fmt.Sprintf("[round %d] order %v", step, order))
			if len(next.violations) > len(m.violations) {
				return failf("protocol violated: %s", next.violations[len(m.violations)])
			}
			if v := checkTransition(moves, prev, cur, false); len(v) > 0 {
				return failf("%s", strings.Join(v, "; "))
			}
			if next.sameState(m) {
				if d := dumpDiff(prev.dump, cur.dump); d != "" && !slices.ContainsFunc(ops, func(o modelOp) bool { return o.kind == opRecordStep }) {
					return failf("a round that changes nothing wrote: %s", d)
				}
			}
			m, prev = next, cur
			continue
		}

		o := g.next(m, false)
		before := m.clone()
		want := m.apply(o)
		got := o.run(ctx, l)
		trace = append(trace, fmt.Sprintf("%s -> %s", o, got))
		stats[o.kindName()+" -> "+resultName(got)]++
		if got != want {
			return failf("%s returned %s, the model says %s", o, got, want)
		}
		cur := observe(ctx, t, l, m)
		if d := stateDiff(m, cur.model); d != "" {
			return failf("after %s the ledger differs from the model:%s", o, d)
		}
		if len(m.violations) > 0 {
			return failf("protocol violated: %s", m.violations[0])
		}
		if v := checkTransition(moves, prev, cur, true); len(v) > 0 {
			return failf("%s", strings.Join(v, "; "))
		}
		if (got.err != "" || before.sameState(m)) && o.kind != opRecordStep {
			if d := dumpDiff(prev.dump, cur.dump); d != "" {
				return failf("%s (refused or a no-op) wrote: %s", o, d)
			}
		}
		if got.err == "" && o.kind != opRecordStep && o.kind != opAskVendor && o.kind != opDecide {
			// The returned task is the stored one.
			if stored := cur.model.tasks[o.ref]; stored != got.task {
				return failf("%s returned %+v, stored %+v", o, got.task, stored)
			}
		}
		prev = cur
	}
	// The run must have exercised the machine: every state reached, and
	// some calls refused.
	seen := map[allot.PaidTaskState]bool{}
	for _, pt := range prev.tasks {
		seen[pt.State] = true
	}
	var cover []string
	for _, k := range slices.Sorted(maps.Keys(stats)) {
		cover = append(cover, fmt.Sprintf("%s: %d", k, stats[k]))
	}
	t.Logf("seed %d: %d steps, %d tasks, %d decisions, %d cost entries, states now %v; calls:\n  %s",
		seed, steps, len(prev.tasks), len(m.decisions), len(m.costs), slices.Sorted(maps.Keys(seen)), strings.Join(cover, "\n  "))
	return true
}

// linearize finds an order of a round's calls whose model results are the
// observed ones and whose final state is the observed state. It returns the
// model after that order (nil if none fits), the order, and why the orders
// failed. Among fitting orders it prefers one without a protocol violation.
func linearize(m *paidModel, ops []modelOp, got []opResult, state *paidModel) (*paidModel, []int, string) {
	var (
		best      *paidModel
		bestOrder []int
		why       strings.Builder
	)
	for _, order := range permutations(len(ops)) {
		c := m.clone()
		fits := true
		for _, i := range order {
			if r := c.apply(ops[i]); r != got[i] {
				if why.Len() < 4000 {
					fmt.Fprintf(&why, "\n  order %v: %s returned %s, the model says %s", order, ops[i], got[i], r)
				}
				fits = false
				break
			}
		}
		if !fits {
			continue
		}
		if d := stateDiff(c, state); d != "" {
			if why.Len() < 4000 {
				fmt.Fprintf(&why, "\n  order %v: results fit, state differs:%s", order, d)
			}
			continue
		}
		if best == nil || len(c.violations) < len(best.violations) {
			best, bestOrder = c, order
		}
	}
	return best, bestOrder, why.String()
}

func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := slices.Insert(slices.Clone(p), i, n-1)
			out = append(out, q)
		}
	}
	return out
}
