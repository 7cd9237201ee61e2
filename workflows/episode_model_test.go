package workflows

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"allot"
	"allot/activities"
	"allot/internal/ledger"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/pipeline"
)

// TestEpisodeModel is the model-based test of the Episode workflow and its
// paid-step and operator-command state machine (issue 7, "Design it
// whole"). For each seed it allocates one episode in a real SQLite ledger,
// runs the Episode workflow in the test environment (virtual time) with
// the real activities against a simulated vendor over HTTP, and plays a
// random sequence, drawn from the seed, of
//
//   - vendor faults, changed between steps: responses lost after accept,
//     failures before accept, no lookup, a revoked key (401), refused
//     submissions (422), tasks the vendor reports failed, results that do
//     not match their sha256, tasks the vendor lost (404);
//   - worker restarts: every activity may fail before it runs, or after its
//     side effect with its result lost, and is retried;
//   - operator commands: a remedy the parked episode shows (a lookup is
//     done as an operator would: ask the vendor by the step's idempotency
//     key and adopt what it has), approve/reject/rework/reassemble at the
//     approval gate, reopening a finished episode (Update-With-Start), or
//     any command on any step, including ones the command table refuses.
//
// After every step it asserts that (a) the episode is completed, rejected,
// waiting for approval, still working, or parked with remedies that are
// complete commands the command table allows, each accepted and successful
// when applied; (b) no idempotency key was charged more often than once
// plus the operator's explicit resubmits (the vendor ignores idempotency
// keys for the whole run, so no second send can hide); (c) a refused
// command is answered at once and leaves the episode as it was, and the
// validator refuses exactly what the table refuses; (d) at quiet points
// the ledger and the state query agree on every paid step. The episode is
// then driven to its end with remedies and approvals, and the ledger is
// checked (ledger.Check; every paid step succeeded or was abandoned by an
// operator).
//
// CI runs a fixed set of seeds (modelDefaultSeed, modelDefaultRuns) in a
// few seconds: go test -run TestEpisodeModel ./workflows/. For long runs set
// the first seed (ALLOT_MODEL_SEED) and the number of seeds
// (ALLOT_MODEL_RUNS); about 400 seeds a minute:
//
//	ALLOT_MODEL_SEED=1000 ALLOT_MODEL_RUNS=5000 go test -count=1 -timeout 0 -run TestEpisodeModel ./workflows/
//
// A failure prints its seed, the violation and the step log; rerun one
// seed with ALLOT_MODEL_SEED=<seed> ALLOT_MODEL_RUNS=1 ... -v.
// ALLOT_MODEL_LOG=1 prints the step log of passing seeds too (with -v),
// ALLOT_MODEL_LOG=live streams it to stderr as it happens.
func TestEpisodeModel(t *testing.T) {
	start, runs := uint64(modelDefaultSeed), modelDefaultRuns
	if v := os.Getenv("ALLOT_MODEL_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("ALLOT_MODEL_SEED=%q: %v", v, err)
		}
		start = n
	}
	if v := os.Getenv("ALLOT_MODEL_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("ALLOT_MODEL_RUNS=%q: want a positive number", v)
		}
		runs = n
	}
	for i := range runs {
		seed := start + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			newModelRun(t, seed).play()
		})
	}
}

const (
	modelDefaultSeed = 1
	modelDefaultRuns = 40

	// modelExploreTicks is how many steps (one a virtual minute) a run
	// plays with faults and random commands; then faults stop and the
	// episode is driven to its end with remedies and approvals, within
	// modelDriveTicks more steps.
	modelExploreTicks = 40
	modelDriveTicks   = 120
	// modelMaxReopens bounds how often a finished episode is reopened.
	modelMaxReopens = 3
	// modelStuckCommand: a command accepted while the episode was idle must
	// have finished within this much virtual time.
	modelStuckCommand = 30 * time.Minute

	modelVendorKey = "sk-model-test-key"
)

// modelPipelines: one pipeline with one paid step, one with two; each with
// an assembly, an approval and a publication.
const modelPipelines = `
[[pipeline]]
name = "model-one"

  [[pipeline.step]]
  name   = "video"
  kind   = "paid"
  action = "render-video"

  [[pipeline.step]]
  name = "assemble"
  kind = "local"

  [[pipeline.step]]
  name = "review"
  kind = "approval"

  [[pipeline.step]]
  name = "publish"
  kind = "local"

[[pipeline]]
name = "model-two"

  [[pipeline.step]]
  name   = "video"
  kind   = "paid"
  action = "render-video"

  [[pipeline.step]]
  name   = "voice"
  kind   = "paid"
  action = "speak"
  params = { voice = "calm" }

  [[pipeline.step]]
  name = "assemble"
  kind = "local"

  [[pipeline.step]]
  name = "review"
  kind = "approval"

  [[pipeline.step]]
  name = "publish"
  kind = "local"
`

// command is one operator command sent as an Update, and what became of it.
type modelCommand struct {
	id     string
	update string
	req    DecisionRequest
	label  string // the remedy line, or what kind of command it is
	// must: the command is one the episode offered (a remedy, approval at
	// the gate, reopening): it must be accepted and succeed.
	must bool
	// predicted is the model's answer: "" if the command table lets the
	// validator accept it, else the error type it refuses it with.
	predicted string
	before    EpisodeState
	idle      bool // sent while the episode waited for an operator or had finished
	sentAt    time.Time

	accepted, rejected, completed bool
	err                           error
	answeredAt, completedAt       time.Time
	settled                       bool
	gate                          chan struct{} // closed when answered (reopening runs)
}

func (c *modelCommand) finished() bool { return c.rejected || c.completed }

func (c *modelCommand) String() string {
	s := c.update
	if c.req.Step != "" {
		s += " --step " + c.req.Step
	}
	if c.req.Resolve != "" {
		s += " --" + string(c.req.Resolve)
	}
	if c.req.RemoteRef != "" {
		s += " " + c.req.RemoteRef
	}
	if c.req.Reason != "" {
		s += fmt.Sprintf(" --reason %q", c.req.Reason)
	}
	return s
}

type modelRun struct {
	t    *testing.T
	seed uint64
	ctx  context.Context
	rng  *rand.Rand // the operator's and the faults' choices

	led       *ledger.Ledger
	acts      *activities.Activities
	sim       *paidvendortest.Simulator
	vendor    *faultyVendor
	vendorURL string
	pipe      string
	episode   string
	steps     []string // all steps, in order
	paid      []string // the paid steps

	// Per Episode run (a reopened episode runs again in a new environment).
	env         *testsuite.TestWorkflowEnvironment
	run         int
	runStart    time.Time
	tick        int
	drive       bool
	stopped     bool
	inflight    *modelCommand
	lastSummary string
	loadGate    chan struct{}

	// Worker restarts: drawn inside activities, from their own stream.
	wmu                         sync.Mutex
	wrng                        *rand.Rand
	restartBefore, restartAfter float64

	logMu      sync.Mutex
	log        []string
	violations []string

	reopens                                   int
	nCmd, nRemedies, nRefused, nFailed, ticks int
}

func newModelRun(t *testing.T, seed uint64) *modelRun {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	led, err := ledger.Open(ctx, "sqlite:"+filepath.Join(dir, "ledger.db"))
	if err != nil {
		t.Fatalf("open ledger: %v", err)
	}
	t.Cleanup(func() {
		if err := led.Close(); err != nil {
			t.Errorf("close ledger: %v", err)
		}
	})
	set, err := pipeline.Parse([]byte(modelPipelines), "episode_model_test")
	if err != nil {
		t.Fatalf("parse pipelines: %v", err)
	}
	m := &modelRun{
		t: t, seed: seed, ctx: ctx, led: led,
		rng:  rand.New(rand.NewPCG(seed, 0x6f70657261746f72)),
		wrng: rand.New(rand.NewPCG(seed, 0x776f726b6572)),
	}
	m.pipe = "model-one"
	if m.rng.IntN(2) == 1 {
		m.pipe = "model-two"
	}
	p, err := set.Get(m.pipe)
	if err != nil {
		t.Fatal(err)
	}
	m.steps, m.paid = p.StepNames(), p.PaidStepNames()

	m.sim = paidvendortest.NewSimulator(paidvendortest.SimConfig{APIKey: modelVendorKey, Seed: int64(seed), IgnoreIdempotency: true})
	m.vendor = &faultyVendor{sim: m.sim}
	if err := m.vendor.set(vendorFaults{}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.vendor)
	t.Cleanup(srv.Close)
	m.vendorURL = srv.URL
	m.acts = &activities.Activities{
		Ledger: led, Pipelines: set, ArtifactsDir: filepath.Join(dir, "artifacts"),
		Credentials:  paidvendor.NewStaticCredentials(modelVendorKey),
		NewVendor:    paidvendor.HTTPClientFactory(srv.URL),
		PollInterval: time.Millisecond,
	}

	nominal := time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC)
	res, err := led.Allocate(ctx, ledger.AllocateInput{
		Pipeline: m.pipe, Key: allot.AllocationKey(m.pipe, nominal), Period: p.PeriodOf(nominal), NominalTime: nominal,
	})
	if err != nil {
		t.Fatalf("allocate: %v", err)
	}
	m.episode = res.Episode.ID
	return m
}

// play runs the episode, reopening it a few times, then checks the ledger.
func (m *modelRun) play() {
	m.logf("seed %d: pipeline %s, paid steps %v, episode %s", m.seed, m.pipe, m.paid, m.episode)
	var reopen *modelCommand
	for run := 1; ; run++ {
		m.runEpisode(run, reopen)
		if m.stopped || m.reopens >= modelMaxReopens || m.rng.Float64() < 0.4 {
			break
		}
		m.reopens++
		reopen = &modelCommand{update: ReassembleUpdate, req: DecisionRequest{Reason: "model: reassemble"}, label: "reopen", must: true}
		if m.rng.Float64() < 0.6 {
			reopen = &modelCommand{update: ReworkUpdate, req: DecisionRequest{Step: modelPick(m.rng, m.paid), Reason: "model: rework"}, label: "reopen", must: true}
		}
	}
	if !m.stopped {
		m.finalChecks()
	}
	m.logf("done: %d runs, %d ticks, %d commands (%d remedies, %d refused, %d failed), %d charges",
		m.run, m.ticks, m.nCmd, m.nRemedies, m.nRefused, m.nFailed, m.sim.ChargeCount())
	if len(m.violations) > 0 {
		m.t.Errorf("seed %d: the model found a violation:\n  %s\n\nreproduce: ALLOT_MODEL_SEED=%d ALLOT_MODEL_RUNS=1 go test -count=1 -run TestEpisodeModel -v ./workflows/\n\nstep log:\n%s",
			m.seed, strings.Join(m.violations, "\n  "), m.seed, strings.Join(m.log, "\n"))
		return
	}
	if os.Getenv("ALLOT_MODEL_LOG") != "" {
		m.t.Logf("step log of seed %d:\n%s", m.seed, strings.Join(m.log, "\n"))
	}
	m.t.Logf("seed %d: %d runs, %d ticks, %d commands (%d remedies, %d refused, %d failed), %d vendor charges",
		m.seed, m.run, m.ticks, m.nCmd, m.nRemedies, m.nRefused, m.nFailed, m.sim.ChargeCount())
}

func (m *modelRun) newEnv() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(2 * time.Minute)
	env.RegisterWorkflow(Episode)
	env.RegisterActivity(m.acts)
	// The same activities under the same names, through a worker that may
	// die around them.
	registerRestartable(env, m, m.acts)
	return env
}

// runEpisode runs the Episode workflow once (a first start, or a start
// with a reopening command) until it ends or the model stops it.
func (m *modelRun) runEpisode(run int, reopen *modelCommand) {
	m.env = m.newEnv()
	m.run, m.tick, m.drive, m.inflight, m.lastSummary, m.loadGate = run, 0, false, nil, "", nil
	m.runStart = m.env.Now()
	m.newPhase()
	if reopen != nil {
		m.loadGate = make(chan struct{})
		reopen.gate = m.loadGate
		// Queued behind the workflow's start: the command arrives with the
		// first workflow task, before the episode is loaded (the workflow
		// cannot be queried yet; it is loading).
		reopen.before = EpisodeState{Stage: allot.StageLoading}
		m.env.RegisterDelayedCallback(func() {
			m.logf("run %d starts with an operator command (Update-With-Start)", run)
			m.send(reopen)
		}, 0)
	} else {
		m.logf("run %d starts", run)
	}
	m.env.RegisterDelayedCallback(m.onTick, time.Minute)
	executeEpisode(m.env, EpisodeInput{Pipeline: m.pipe, EpisodeID: m.episode})

	if m.stopped {
		return
	}
	if c := m.inflight; c != nil {
		m.settle(c, nil)
		if !c.finished() {
			m.violate("%s was never answered: the run ended while it waited", c)
		}
	}
	var res EpisodeResult
	if err := m.env.GetWorkflowResult(&res); err != nil {
		m.violate("the Episode run ended with an error (stage failed): %v", err)
		m.stopped = true
		return
	}
	m.logf("%s run %d ended: %s", m.clock(), run, modelSummary(res))
	if res.Stage != allot.StageCompleted && res.Stage != allot.StageRejected {
		m.violate("the Episode returned in stage %s, not completed or rejected", res.Stage)
	}
	m.checkCharges()
	m.checkLedgerAgrees(res)
	if len(m.violations) > 0 {
		m.stopped = true
	}
}

func (m *modelRun) clock() string {
	return fmt.Sprintf("[r%d %6s]", m.run, m.env.Now().Sub(m.runStart).Round(time.Second))
}

func (m *modelRun) logf(format string, args ...any) {
	m.logMu.Lock()
	defer m.logMu.Unlock()
	m.log = append(m.log, fmt.Sprintf(format, args...))
	if os.Getenv("ALLOT_MODEL_LOG") == "live" {
		fmt.Fprintln(os.Stderr, m.log[len(m.log)-1])
	}
}

func (m *modelRun) violate(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	m.violations = append(m.violations, msg)
	m.logf("%s VIOLATION: %s", m.clock(), msg)
}

// stop ends a run after a violation, so the log ends where it happened.
func (m *modelRun) stop() {
	if !m.stopped {
		m.stopped = true
		m.env.CancelWorkflow()
	}
}

func (m *modelRun) drawRestart() (before, after bool) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	return m.wrng.Float64() < m.restartBefore, m.wrng.Float64() < m.restartAfter
}

func (m *modelRun) setRestarts(before, after float64) {
	m.wmu.Lock()
	m.restartBefore, m.restartAfter = before, after
	m.wmu.Unlock()
}

func modelPick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// newPhase draws the vendor's faults and the worker's restart rates until
// the next change.
func (m *modelRun) newPhase() {
	r := m.rng
	var f vendorFaults
	if r.Float64() < 0.35 {
		f.Sim.LoseResponseAfterAccept = modelPick(r, []float64{0.5, 1})
	}
	if r.Float64() < 0.2 {
		f.Sim.FailBeforeAccept = modelPick(r, []float64{0.3, 1})
	}
	f.Sim.NoLookup = r.Float64() < 0.35
	f.Revoked = r.Float64() < 0.1
	f.Reject = r.Float64() < 0.08
	f.FailTasks = r.Float64() < 0.1
	f.CorruptResults = r.Float64() < 0.1
	f.LoseTasks = r.Float64() < 0.07
	if r.Float64() < 0.25 {
		f = vendorFaults{} // a quiet phase
	}
	before, after := modelPick(r, []float64{0, 0, 0.1, 0.2}), modelPick(r, []float64{0, 0.15, 0.3})
	if err := m.vendor.set(f); err != nil {
		m.t.Fatal(err)
	}
	m.setRestarts(before, after)
	m.logf("%s faults: %s; worker dies before an activity %.0f%%, after it %.0f%%", m.clock(), f, before*100, after*100)
}

func (m *modelRun) enterDrive() {
	m.drive = true
	if err := m.vendor.set(vendorFaults{}); err != nil {
		m.t.Fatal(err)
	}
	m.setRestarts(0, 0)
	m.logf("%s drive: faults off; finishing the episode with remedies and approvals", m.clock())
}

func (m *modelRun) query() (EpisodeState, error) {
	v, err := m.env.QueryWorkflow(StateQuery)
	if err != nil {
		return EpisodeState{}, err
	}
	var st EpisodeState
	err = v.Get(&st)
	return st, err
}

// onTick is one step of the model: every virtual minute it looks at the
// episode, checks the invariants, and acts.
func (m *modelRun) onTick() {
	if m.stopped || m.env.IsWorkflowCompleted() {
		return
	}
	m.tick++
	m.ticks++
	st, err := m.query()
	if err != nil {
		m.violate("state query: %v", err)
		m.stop()
		return
	}
	key := modelSummary(st)
	if a := st.Attention; a != nil {
		key += a.Since.String() // parked again on the same thing: log it again
	}
	if key != m.lastSummary {
		m.logf("%s %s", m.clock(), modelSummary(st))
		m.lastSummary = key
	}
	if c := m.inflight; c != nil {
		m.settle(c, &st)
	}
	m.awaitSendWindow(st)
	m.checkState(st)
	if len(m.violations) == 0 {
		m.act(st)
	}
	if len(m.violations) > 0 {
		m.stop()
		return
	}
	m.env.RegisterDelayedCallback(m.onTick, time.Minute)
}

// awaitSendWindow lets real time pass while SubmitPaidTask waits for an
// earlier send's window to close: the ledger keeps the window's deadline
// on the wall clock (PaidTask.SendingUntil), which virtual time does not
// move, so the activity would retry in virtual time for as long as the
// window lasts in real time (at most activities' sendWindow, 30 s).
func (m *modelRun) awaitSendWindow(st EpisodeState) {
	if st.Retrying == nil || st.Retrying.Activity != "SubmitPaidTask" {
		return
	}
	tasks, err := m.led.PaidTasks(m.ctx, m.pipe, m.episode)
	if err != nil {
		m.violate("ledger: %v", err)
		return
	}
	var until time.Time
	for _, t := range tasks {
		if t.State == allot.PaidIntent && t.MaybeSent && t.SendingUntil.After(until) {
			until = t.SendingUntil
		}
	}
	if d := time.Until(until); d > 0 {
		d = min(d+50*time.Millisecond, time.Minute)
		m.logf("%s the ledger says a send may be under way until %s (wall clock): waiting %s of real time", m.clock(), until.Format(time.RFC3339Nano), d.Round(time.Millisecond))
		time.Sleep(d)
	}
}

func modelQuiet(s allot.Stage) bool {
	switch s {
	case allot.StageNeedsAttention, allot.StageWaitingApproval, allot.StageCompleted, allot.StageRejected:
		return true
	}
	return false
}

// busy: a command is accepted and not finished; the ledger may be ahead of
// the state query until it is.
func (m *modelRun) busy() bool { return m.inflight != nil && !m.inflight.finished() }

func (m *modelRun) act(st EpisodeState) {
	if !m.drive && m.tick > modelExploreTicks {
		m.enterDrive()
	}
	if m.drive && m.tick > modelExploreTicks+modelDriveTicks {
		m.violate("the episode did not finish within %d steps of driving it with remedies and approvals (faults off): %s", modelDriveTicks, modelSummary(st))
		return
	}
	// One command at a time. Faults change between commands, or while a
	// command sent during work waits for its turn; never under a command
	// the episode is applying, which would change what it meets.
	if m.busy() && m.inflight.idle {
		return
	}
	if !m.drive && m.rng.Float64() < 0.2 {
		m.newPhase()
	}
	if m.busy() {
		return
	}
	switch st.Stage {
	case allot.StageNeedsAttention:
		if m.drive || m.rng.Float64() < 0.7 {
			m.applyRemedy(st)
		} else {
			m.randomCommand(st)
		}
	case allot.StageWaitingApproval:
		if m.drive {
			m.send(&modelCommand{update: ApproveUpdate, req: DecisionRequest{Reason: "model: approve"}, label: "approve at the gate", must: true, before: st})
			return
		}
		switch r := m.rng.Float64(); {
		case r < 0.3:
			m.send(&modelCommand{update: ApproveUpdate, req: DecisionRequest{Reason: "model: approve"}, label: "approve at the gate", must: true, before: st})
		case r < 0.4:
			m.send(&modelCommand{update: RejectUpdate, req: DecisionRequest{Reason: "model: reject"}, label: "reject at the gate", must: true, before: st})
		case r < 0.7:
			m.send(&modelCommand{update: ReworkUpdate, req: DecisionRequest{Step: modelPick(m.rng, m.paid), Reason: "model: rework at the gate"}, label: "rework at the gate", must: true, before: st})
		case r < 0.8:
			m.send(&modelCommand{update: ReassembleUpdate, req: DecisionRequest{Reason: "model: reassemble"}, label: "reassemble at the gate", must: true, before: st})
		default:
			m.randomCommand(st)
		}
	default:
		if !m.drive && m.rng.Float64() < 0.1 {
			m.randomCommand(st)
		}
	}
}

// applyRemedy runs one of the remedies the parked episode shows, as an
// operator would.
func (m *modelRun) applyRemedy(st EpisodeState) {
	att := st.Attention
	if att == nil {
		return // checkState reported it
	}
	if att.ErrorType == allot.VendorNotConfigured && m.vendor.get().Revoked && (m.drive || m.rng.Float64() < 0.6) {
		m.vendor.setRevoked(false)
		m.logf("%s operator rotates the vendor key", m.clock())
	}
	for _, i := range m.rng.Perm(len(att.Remedies)) {
		line := att.Remedies[i]
		rc, err := parseRemedy(line)
		if err != nil {
			continue // checkState reported it
		}
		c := &modelCommand{update: rc.update(), req: DecisionRequest{Step: rc.step, Resolve: rc.action, Reason: rc.reason}, label: "remedy: " + line, must: true, before: st}
		switch rc.verb {
		case "rework":
			c.req.Resolve = ""
		case "lookup":
			if m.vendor.get().LoseTasks {
				// The vendor lists the task by key but answers 404 for it:
				// an adopt would be refused (InvalidRemoteRef), rightly.
				m.logf("%s operator skips `%s`: the vendor is losing tasks", m.clock(), line)
				continue
			}
			task, err := m.operatorLookup(rc.step)
			if err != nil {
				m.logf("%s operator runs `%s`: %v", m.clock(), line, err)
				continue
			}
			m.logf("%s operator runs `%s`: the vendor has %s (%s)", m.clock(), line, task.ID, task.Status)
			c.req.Resolve, c.req.RemoteRef, c.req.Reason = allot.ActionAdopt, task.ID, "model: found by lookup"
		}
		m.nRemedies++
		m.send(c)
		return
	}
	m.violate("parked on %s (%s) and none of its remedies can be run: %q", att.Step, att.ErrorType, att.Remedies)
}

// operatorLookup does what `starter episode lookup` does: ask the vendor
// for the step's latest task by its idempotency key.
func (m *modelRun) operatorLookup(step string) (paidvendor.Task, error) {
	t, err := m.led.LatestPaidTask(m.ctx, m.pipe, m.episode, step)
	if err != nil {
		return paidvendor.Task{}, err
	}
	c, err := paidvendor.NewHTTPClient(m.vendorURL, modelVendorKey, nil)
	if err != nil {
		return paidvendor.Task{}, err
	}
	return c.LookupByIdempotencyKey(m.ctx, allot.IdempotencyKey(m.pipe, m.episode, step, t.Revision))
}

// randomCommand sends any command on any step, allowed or not.
func (m *modelRun) randomCommand(st EpisodeState) {
	r := m.rng
	c := &modelCommand{update: modelPick(r, []string{ApproveUpdate, RejectUpdate, ReworkUpdate, ReassembleUpdate, ResolveUpdate}), label: "random", before: st}
	if c.update == ReworkUpdate || c.update == ResolveUpdate {
		if r.Float64() < 0.6 {
			c.req.Step = modelPick(r, m.paid)
		} else {
			c.req.Step = modelPick(r, append(slices.Clone(m.steps), "no-such-step", ""))
		}
	}
	if c.update == ResolveUpdate {
		c.req.Resolve = modelPick(r, []allot.Action{allot.ActionAdopt, allot.ActionResubmit, allot.ActionRetry, allot.ActionAbandon, "bogus"})
		if c.req.Resolve == allot.ActionAdopt {
			switch r.IntN(4) {
			case 0: // none
			case 1:
				c.req.RemoteRef = fmt.Sprintf("vt_%016x%016x", r.Uint64(), r.Uint64())
			case 2:
				if i := slices.IndexFunc(st.Steps, func(s activities.StepState) bool { return s.Name == c.req.Step }); i >= 0 {
					c.req.RemoteRef = st.Steps[i].RemoteRef
				}
			case 3:
				if slices.Contains(m.paid, c.req.Step) {
					if task, err := m.operatorLookup(c.req.Step); err == nil {
						c.req.RemoteRef = task.ID
					}
				}
			}
		}
	}
	if r.Float64() < 0.7 {
		c.req.Reason = "model: random"
	}
	m.send(c)
}

// predict is the model of the update validators: the shape rules, then
// the command table (allot.EpisodeActionAllowed, allot.CheckReassemble,
// allot.PaidActionsAllowed)
// on the state the command meets. It returns "" for a command the
// validator must accept, else the error type it must refuse it with.
func modelPredict(update string, req DecisionRequest, st EpisodeState) string {
	switch update {
	case RejectUpdate:
		if strings.TrimSpace(req.Reason) == "" {
			return allot.InvalidInput
		}
	case ReworkUpdate:
		if req.Step == "" {
			return allot.InvalidInput
		}
	case ResolveUpdate:
		switch {
		case req.Step == "":
			return allot.InvalidInput
		case !slices.Contains([]allot.Action{allot.ActionAdopt, allot.ActionResubmit, allot.ActionRetry, allot.ActionAbandon}, req.Resolve):
			return allot.InvalidInput
		case req.Resolve == allot.ActionAdopt && req.RemoteRef == "":
			return allot.InvalidInput
		case req.Resolve == allot.ActionAbandon && req.Reason == "":
			return allot.InvalidInput
		}
	}
	if st.Stage == allot.StageLoading {
		return "" // not loaded: the handler checks it once the episode is
	}
	switch update {
	case ApproveUpdate:
		return modelNotReady(allot.EpisodeActionAllowed(allot.ActionApprove, st.Stage, nil))
	case RejectUpdate:
		return modelNotReady(allot.EpisodeActionAllowed(allot.ActionReject, st.Stage, nil))
	case ReassembleUpdate:
		if err := allot.EpisodeActionAllowed(allot.ActionReassemble, st.Stage, nil); err != nil {
			return allot.NotReady
		}
		// Reassemble runs the assembly again: once it has run.
		name, status := "", allot.StepStatus("")
		if i := slices.IndexFunc(st.Steps, func(s activities.StepState) bool { return s.Kind == "local" && s.Action == "assemble" }); i >= 0 {
			name, status = st.Steps[i].Name, st.Steps[i].Status
		}
		return modelNotReady(allot.CheckReassemble(name, status))
	}
	action := allot.ActionRework
	if update == ResolveUpdate {
		action = req.Resolve
	}
	// Rework plans a new paid revision; resolve is for any step that can
	// park (paid, or a go, exec or activity step that failed for good).
	i := slices.IndexFunc(st.Steps, func(s activities.StepState) bool { return s.Name == req.Step })
	if i < 0 || st.Steps[i].Kind == "approval" || action == allot.ActionRework && st.Steps[i].Kind != "paid" {
		return allot.StepNotFound
	}
	attention := ""
	if a := st.Attention; a != nil && a.Step == req.Step {
		attention = a.ErrorType
	}
	if !slices.Contains(allot.PaidActionsAllowed(taskState(st.Steps[i]), attention), action) {
		return allot.NotReady
	}
	return ""
}

func modelNotReady(err error) string {
	if err != nil {
		return allot.NotReady
	}
	return ""
}

// send sends a command as an Update and, in a callback queued right behind
// it (the same virtual instant, before the workflow can move on), checks
// how the validator answered.
func (m *modelRun) send(c *modelCommand) {
	if c.before.Stage == "" {
		st, err := m.query()
		if err != nil {
			m.violate("state query: %v", err)
			m.stop()
			return
		}
		c.before = st
	}
	m.nCmd++
	c.id = fmt.Sprintf("r%d-c%d", m.run, m.nCmd)
	c.idle = modelQuiet(c.before.Stage) && !m.busy()
	c.predicted = modelPredict(c.update, c.req, c.before)
	c.sentAt = m.env.Now()
	m.inflight = c
	expect := "accept"
	if c.predicted != "" {
		expect = "refuse: " + c.predicted
	}
	m.logf("%s   operator: %s  [%s; table says %s]", m.clock(), c, c.label, expect)
	answered := func() {
		if c.gate != nil {
			close(c.gate)
			c.gate = nil
		}
	}
	m.env.UpdateWorkflow(c.update, c.id, &testsuite.TestUpdateCallback{
		OnAccept: func() {
			c.accepted, c.answeredAt = true, m.env.Now()
			answered()
		},
		OnReject: func(err error) {
			c.rejected, c.err, c.answeredAt = true, err, m.env.Now()
			m.nRefused++
			m.logf("%s   <- %s refused by the validator: %s: %s", m.clock(), c.id, errorType(err), rootMessage(err))
			answered()
		},
		OnComplete: func(_ any, err error) {
			c.completed, c.err, c.completedAt = true, err, m.env.Now()
			if err != nil {
				m.nFailed++
				m.logf("%s   <- %s failed: %s: %s", m.clock(), c.id, errorType(err), rootMessage(err))
			} else {
				m.logf("%s   <- %s done", m.clock(), c.id)
			}
		},
	}, c.req)
	m.env.RegisterDelayedCallback(func() { m.checkAnswered(c) }, 0)
}

// checkAnswered runs in the same virtual instant as the command was sent,
// right after the workflow took it: the validator must have answered, as
// the model predicted; a refused command must have left the state as it was.
func (m *modelRun) checkAnswered(c *modelCommand) {
	if m.stopped {
		return
	}
	switch {
	case !c.accepted && !c.rejected && c.before.Stage == allot.StageLoading:
		// Sent with the start: the workflow takes it once its handlers
		// are set; the load waits for it (loadGate).
	case !c.accepted && !c.rejected:
		m.violate("%s (%s) was neither accepted nor refused at once", c.id, c)
	case c.rejected && c.predicted == "":
		m.violate("%s (%s) was refused (%s: %s), but the command table allows it in %s", c.id, c, errorType(c.err), rootMessage(c.err), modelDescribe(c))
	case c.rejected && errorType(c.err) != c.predicted:
		m.violate("%s (%s) was refused with %s, the model expects %s: %s", c.id, c, errorType(c.err), c.predicted, rootMessage(c.err))
	case c.accepted && c.predicted != "":
		m.violate("%s (%s) was accepted, but the command table refuses it (%s) in %s", c.id, c, c.predicted, modelDescribe(c))
	}
	if c.rejected || (c.completed && c.err != nil) {
		if !c.answeredAt.Equal(c.sentAt) && !c.completedAt.Equal(c.sentAt) {
			m.violate("%s was refused only at %s, not at once", c.id, c.completedAt)
		}
		if c.before.Stage != allot.StageLoading {
			st, err := m.query()
			if err != nil {
				m.violate("state query: %v", err)
			} else if got, want := modelStateView(st), modelStateView(c.before); got != want {
				m.violate("refused %s (%s) changed the episode:\n    before %s\n    after  %s", c.id, c, want, got)
			}
		}
	}
	if c.must && c.rejected {
		m.violate("%s (%s) is a command the episode offered, and it was refused: %v", c.id, c.label, c.err)
	}
	if len(m.violations) > 0 {
		m.stop()
	}
}

func modelDescribe(c *modelCommand) string {
	s := string(c.before.Stage)
	for _, st := range c.before.Steps {
		if st.Name == c.req.Step {
			s += fmt.Sprintf(", step %s %s", st.Name, taskState(st))
		}
	}
	if a := c.before.Attention; a != nil {
		s += fmt.Sprintf(", parked on %s (%s)", a.Step, a.ErrorType)
	}
	return s
}

// settle judges a finished command once: a command the episode offered
// must have succeeded; a failed one sent while the episode was idle must
// have failed at once if it was NotReady, left the episode as it was, and
// never be a ledger refusal of something the table allowed. st is the
// state now (nil when the run is over).
func (m *modelRun) settle(c *modelCommand, st *EpisodeState) {
	if c.settled {
		return
	}
	if !c.finished() {
		if c.idle && m.env.Now().Sub(c.sentAt) > modelStuckCommand {
			m.violate("%s (%s), accepted while the episode was idle, has not finished after %s", c.id, c, modelStuckCommand)
		}
		return
	}
	c.settled = true
	if !c.completed || c.err == nil {
		return
	}
	typ := errorType(c.err)
	if c.must {
		m.violate("%s (%s) is a command the episode offered, and it failed: %s: %s", c.id, c.label, typ, rootMessage(c.err))
	}
	switch typ {
	case allot.PaidTaskStateConflict, allot.PaidTaskNotFound, allot.RemoteRefConflict:
		m.violate("%s (%s): the command table allowed it in %s, but the ledger refused it: %s", c.id, c, modelDescribe(c), rootMessage(c.err))
	}
	if c.idle {
		if typ == allot.NotReady && !c.completedAt.Equal(c.sentAt) {
			m.violate("%s was refused NotReady only at %s, though the episode was idle when it was sent", c.id, c.completedAt)
		}
		if st != nil && modelStateView(*st) != modelStateView(c.before) {
			m.violate("failed %s (%s) changed the episode:\n    before %s\n    after  %s", c.id, c, modelStateView(c.before), modelStateView(*st))
		}
	}
}

// checkState asserts (a), (b) and, at quiet points, (d).
func (m *modelRun) checkState(st EpisodeState) {
	switch st.Stage {
	case allot.StageCompleted, allot.StageRejected, allot.StageWaitingApproval, allot.StageRunning, allot.StageRetrying, allot.StageLoading:
	case allot.StageNeedsAttention:
		m.checkParked(st)
	default:
		m.violate("the episode is %s: %s", st.Stage, st.Error)
	}
	m.checkCharges()
	if modelQuiet(st.Stage) && !m.busy() {
		m.checkLedgerAgrees(st)
	}
}

// checkParked: a parked episode shows remedies; each is a complete command
// for this episode and step, and one the command table allows for the
// task's state in the ledger and the attention.
func (m *modelRun) checkParked(st EpisodeState) {
	att := st.Attention
	if att == nil {
		m.violate("parked (needs_attention) without an attention")
		return
	}
	if len(att.Remedies) == 0 {
		m.violate("parked on %s (%s, task %s) without any remedy: no exit", att.Step, att.ErrorType, att.TaskState)
		return
	}
	var cmds []remedyCmd
	for _, line := range att.Remedies {
		rc, err := parseRemedy(line)
		if err != nil {
			m.violate("remedy %q is not a complete command: %v", line, err)
			continue
		}
		if rc.pipe != m.pipe || rc.episode != m.episode || rc.step != att.Step {
			m.violate("remedy %q names another episode or step than %s/%s step %s", line, m.pipe, m.episode, att.Step)
		}
		cmds = append(cmds, rc)
	}
	if m.busy() {
		return // a command is being applied: the ledger may be ahead
	}
	ls := allot.PaidTaskState("")
	if !slices.Contains(m.paid, att.Step) {
		// A step that is not paid has no paid task: its state is the
		// query's (a go, exec or activity step parks as failed).
		if i := slices.IndexFunc(st.Steps, func(s activities.StepState) bool { return s.Name == att.Step }); i >= 0 {
			ls = taskState(st.Steps[i])
		}
	} else if t, err := m.led.LatestPaidTask(m.ctx, m.pipe, m.episode, att.Step); err == nil {
		ls = t.State
	} else if !errors.Is(err, ledger.ErrPaidTaskNotFound) {
		m.violate("ledger: %v", err)
		return
	}
	allowed := allot.PaidActionsAllowed(ls, att.ErrorType)
	if len(allowed) == 0 {
		m.violate("parked on %s for %s while its task is %s in the ledger: the command table allows nothing there, so no command can unpark it", att.Step, att.ErrorType, ls)
	}
	for i, rc := range cmds {
		if !slices.Contains(allowed, rc.action) {
			m.violate("remedy %q (%s) is not allowed by the command table for a task that is %s in the ledger, parked on %s (allowed: %v)",
				att.Remedies[i], rc.action, ls, att.ErrorType, allowed)
		}
	}
}

// checkLedgerAgrees: the state query and the ledger show each paid step's
// latest revision in the same state.
func (m *modelRun) checkLedgerAgrees(st EpisodeState) {
	for _, s := range st.Steps {
		if s.Kind != "paid" {
			continue
		}
		var (
			ls  allot.PaidTaskState
			rev int
			ms  bool
		)
		t, err := m.led.LatestPaidTask(m.ctx, m.pipe, m.episode, s.Name)
		switch {
		case err == nil:
			ls, rev, ms = t.State, t.Revision, t.MaybeSent
		case !errors.Is(err, ledger.ErrPaidTaskNotFound):
			m.violate("ledger: %v", err)
			continue
		}
		if s.TaskState != ls || (ls != "" && s.Revision != rev) {
			m.violate("at %s, step %s: the state query shows task %q revision %d, the ledger %q revision %d (maybe_sent %v)", st.Stage, s.Name, s.TaskState, s.Revision, ls, rev, ms)
		}
	}
}

// checkCharges asserts (b): every key the vendor charged belongs to a paid
// task, and was charged at most once plus once per resubmit an operator
// applied to that task; every recorded reference is one the vendor charged
// for that task's key.
func (m *modelRun) checkCharges() {
	charges := m.sim.Charges()
	tasks, err := m.led.PaidTasks(m.ctx, m.pipe, m.episode)
	if err != nil {
		m.violate("ledger: %v", err)
		return
	}
	decisions, err := m.led.Decisions(m.ctx, m.pipe, m.episode)
	if err != nil {
		m.violate("ledger: %v", err)
		return
	}
	byKey := map[string]ledger.PaidTask{}
	for _, t := range tasks {
		byKey[t.IdempotencyKey] = t
	}
	type rev struct {
		step string
		rev  int
	}
	resubmits := map[rev]int{}
	for _, d := range decisions {
		if d.Action == allot.ActionResubmit {
			resubmits[rev{d.Step, d.Revision}]++
		}
	}
	perKey := map[string][]string{}
	var keys []string
	for _, c := range charges {
		if _, ok := perKey[c.IdempotencyKey]; !ok {
			keys = append(keys, c.IdempotencyKey)
		}
		perKey[c.IdempotencyKey] = append(perKey[c.IdempotencyKey], c.TaskID)
	}
	sort.Strings(keys)
	for _, key := range keys {
		ids := perKey[key]
		t, ok := byKey[key]
		if !ok {
			m.violate("the vendor charged idempotency key %s (%v), which no paid task has", key, ids)
			continue
		}
		if allowed := 1 + resubmits[rev{t.Step, t.Revision}]; len(ids) > allowed {
			m.violate("paid task %s revision %d (key %s) was submitted %d times: vendor tasks %v; allowed %d (1 + %d operator resubmits)",
				t.Step, t.Revision, key, len(ids), ids, allowed, allowed-1)
		}
	}
	for _, t := range tasks {
		if t.RemoteRef != "" && !slices.Contains(perKey[t.IdempotencyKey], t.RemoteRef) {
			m.violate("paid task %s revision %d records vendor task %s, which the vendor did not charge for its key %s", t.Step, t.Revision, t.RemoteRef, t.IdempotencyKey)
		}
	}
}

// finalChecks: the ledger passes its own audit, and every paid step ended
// succeeded or abandoned by an operator, with no revision left in flight.
func (m *modelRun) finalChecks() {
	vs, err := m.led.Check(m.ctx, m.pipe)
	if err != nil {
		m.violate("ledger check: %v", err)
	}
	for _, v := range vs {
		m.violate("ledger check: %s", v)
	}
	m.checkCharges()
	tasks, err := m.led.PaidTasks(m.ctx, m.pipe, m.episode)
	if err != nil {
		m.violate("ledger: %v", err)
		return
	}
	decisions, err := m.led.Decisions(m.ctx, m.pipe, m.episode)
	if err != nil {
		m.violate("ledger: %v", err)
		return
	}
	latest := map[string]ledger.PaidTask{}
	for _, t := range tasks {
		switch t.State {
		case allot.PaidPlanned, allot.PaidIntent, allot.PaidSubmitted:
			m.violate("paid task %s revision %d is left %s", t.Step, t.Revision, t.State)
		case allot.PaidAbandoned:
			if !slices.ContainsFunc(decisions, func(d ledger.OperatorDecision) bool {
				return d.Action == allot.ActionAbandon && d.Step == t.Step && d.Revision == t.Revision
			}) {
				m.violate("paid task %s revision %d is abandoned, but no operator abandoned it", t.Step, t.Revision)
			}
		}
		if cur, ok := latest[t.Step]; !ok || t.Revision > cur.Revision {
			latest[t.Step] = t
		}
	}
	for _, step := range m.paid {
		t, ok := latest[step]
		switch {
		case !ok:
			m.violate("paid step %s never ran", step)
		case t.State != allot.PaidSucceeded && t.State != allot.PaidAbandoned:
			m.violate("paid step %s ended %s (revision %d), not succeeded or abandoned", step, t.State, t.Revision)
		}
	}
	summary := make([]string, 0, len(m.paid))
	for _, step := range m.paid {
		summary = append(summary, fmt.Sprintf("%s %s/r%d", step, latest[step].State, latest[step].Revision))
	}
	m.logf("final ledger: %s; %d paid tasks, %d decisions, %d vendor charges", strings.Join(summary, ", "), len(tasks), len(decisions), m.sim.ChargeCount())
}
