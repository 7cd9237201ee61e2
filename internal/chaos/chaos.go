// Package chaos runs allot the way production runs it, as real processes
// (the Temporal server, the simulated vendors, several workers sharing one
// ledger), drives load through every entry (backfills, manual runs,
// duplicate concurrent starts, operator approvals) while it kills workers
// and restarts the vendor and the server, then drains, resolves what a
// person would have to, and checks allot's promises. The load and fault
// schedule is a function of the seed. chaos/ is its command.
package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"allot"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/pipeline"
	"allot/workflows"
)

// Config is one chaos run.
type Config struct {
	Scale Scale
	Seed  uint64
	// Postgres is a PostgreSQL URL the run may create a database with (its
	// own, named chaos_<seed>_<time>); "" runs a SQLite ledger.
	Postgres string
	// Workers is how many worker processes share the ledger; 0 means 3 on
	// PostgreSQL and 1 on SQLite.
	Workers int
	// Dir keeps the run's state and logs; "" is a new temporary directory,
	// removed after a clean run unless Keep.
	Dir  string
	Keep bool
	// Bins are prebuilt binaries; empty ones are built from this module.
	Bins Binaries
	// Progress receives progress lines (nil: discarded).
	Progress io.Writer
	// BrokenVendor is the checks' self-test: the strict vendor ignores
	// idempotency keys, so the resubmit a person runs for a parked episode
	// charges a second time, and the run must report it.
	BrokenVendor bool
}

// Summary is what a run found.
type Summary struct {
	Seed     uint64
	Scale    string
	Plan     string // digest of the load and fault schedule
	Ledger   string // "postgres" or "sqlite"
	Workers  int
	Duration time.Duration

	Requests         int // start requests sent, every duplicate counted
	Backfills        int
	Runs             int // ScheduledRun executions in Temporal
	Keys             int // allocation keys with a recorded run
	Episodes         int
	Skipped          int // runs skipped at a cap
	PaidTasks        int
	Charges          int
	WorkerKills      int
	WorkerRestarts   int
	UnexpectedExits  int
	VendorRestarts   int
	TemporalRestarts int
	Approvals        int
	Parked           int // episodes a person had to move on
	HumanCommands    int
	EpisodeP50       time.Duration
	EpisodeP95       time.Duration
	// EpisodeP95NoHuman leaves out the episodes a person moved on (they
	// waited, parked, for the drain).
	EpisodeP95NoHuman time.Duration
	// Budgets: the (budget, period)s with spending, those that ran out
	// (refused a step), the refusals a person saw, the least share of an
	// exhausted period's limit settled (per mille), and the periods
	// settled above their limit (a violation each).
	BudgetPeriods, BudgetsExhausted, BudgetRefusals int
	BudgetUseMin                                    int
	BudgetsOverLimit                                int
	// Vendor controls: the most requests the default vendor served at
	// once (its max_in_flight is DefaultMaxInFlight), the pauses (of the
	// default and the activity-adapter vendor), the requests of any kind
	// that reached a paused vendor after the grace (each a violation), the
	// most episodes seen waiting for a paused vendor at once, and the
	// default vendor's breaker trips.
	VendorMaxInFlight int
	VendorPauses      int
	PausedRequests    int64
	PausedWaits       int
	VendorTrips       int
	// ActivityCharges are the activity-adapter vendor's charges: the
	// tasks it accepted through its activities; ActivityRefusals the
	// episodes of its pipeline (chaos-daily) a budget refused, parked.
	ActivityCharges, ActivityRefusals int
	// Catch-up: chaos-catchup's scheduled times, those its policy
	// (latest) skipped as missed, and the outages of every worker.
	CatchUpTimes, MissedCatchUp, WorkersOutages int
	// Bill and Costs are the vendors' charges and the ledger's costs, in
	// minor units (one currency: USD). Bill and Charges are the bills
	// without the planted faults: a dropped charge counts as its line, at
	// its task's cost (the drift items answer for the faults).
	Bill, Costs int64
	// BillFaults are those the default vendor planted in its bill;
	// DriftItems those the ledger holds after the checker's own
	// reconciliation pass (each planted fault has one, and no other).
	BillFaults, DriftItems int
	// LateRecords are chaos-deadline's deadline records: its planted late
	// period and, when the deadline was declared before its warning time,
	// the warning (checkDeadlines).
	LateRecords int
	// Batches: chaos-batch's vendor batches, those the vendor ended half
	// way (expired, cancelled), those a create of went unanswered, the
	// items they carried (paid tasks), the items carried by more than one
	// batch (sent again after a batch left them undone), and the batch
	// vendor's charges.
	Batches, BatchesEndedEarly, BatchCreatesUnanswered int
	BatchItems, BatchItemsResent, BatchCharges         int
	Violations                                         []string
}

// Line is the one-line summary the command prints.
func (s Summary) Line() string {
	return fmt.Sprintf("chaos seed=%d scale=%s plan=%s ledger=%s workers=%d duration=%s requests=%d backfills=%d runs=%d keys=%d episodes=%d skipped=%d paid_tasks=%d charges=%d activity_charges=%d bill=%s costs=%s bill_faults=%d drift_items=%d late_records=%d batches=%d batches_ended_early=%d batch_creates_unanswered=%d batch_items=%d batch_items_resent=%d batch_charges=%d budget_periods=%d budgets_exhausted=%d budget_refusals=%d activity_budget_refusals=%d budget_use_min=%d.%d%% budgets_over_limit=%d worker_kills=%d restarts=worker:%d,vendor:%d,temporal:%d worker_exits=%d approvals=%d parked_resolved_by_human=%d human_commands=%d vendor_max_in_flight=%d/%d vendor_pauses=%d paused_requests=%d paused_waits=%d vendor_trips=%d workers_outages=%d catch_up_times=%d missed_catch_up=%d episode_p50=%s episode_p95=%s episode_p95_no_human=%s violations=%d",
		s.Seed, s.Scale, s.Plan, s.Ledger, s.Workers, s.Duration.Round(time.Second), s.Requests, s.Backfills, s.Runs, s.Keys, s.Episodes, s.Skipped,
		s.PaidTasks, s.Charges, s.ActivityCharges, usd(s.Bill), usd(s.Costs), s.BillFaults, s.DriftItems, s.LateRecords,
		s.Batches, s.BatchesEndedEarly, s.BatchCreatesUnanswered, s.BatchItems, s.BatchItemsResent, s.BatchCharges,
		s.BudgetPeriods, s.BudgetsExhausted, s.BudgetRefusals, s.ActivityRefusals, s.BudgetUseMin/10, s.BudgetUseMin%10, s.BudgetsOverLimit,
		s.WorkerKills, s.WorkerRestarts, s.VendorRestarts, s.TemporalRestarts, s.UnexpectedExits,
		s.Approvals, s.Parked, s.HumanCommands, s.VendorMaxInFlight, DefaultMaxInFlight, s.VendorPauses, s.PausedRequests, s.PausedWaits, s.VendorTrips,
		s.WorkersOutages, s.CatchUpTimes, s.MissedCatchUp,
		s.EpisodeP50.Round(100*time.Millisecond), s.EpisodeP95.Round(100*time.Millisecond), s.EpisodeP95NoHuman.Round(100*time.Millisecond), len(s.Violations))
}

// usd prints minor units of USD as one word of the summary: "1500.00USD".
func usd(minor int64) string {
	return strings.ReplaceAll(allot.Money{Amount: minor, Currency: "USD"}.String(), " ", "")
}

// run is the state of one chaos run.
type run struct {
	cfg   Config
	sc    Scale
	dir   string
	start time.Time
	logf  func(string, ...any)

	st        *stack
	ledgerURL string
	led       *ledger.Ledger
	pipelines *pipeline.Set
	pipesPath string
	// deadlineDue is when chaos-deadline's one judged period is due.
	deadlineDue time.Time
	env         []string // for the worker and the starter
	vendor      *vendorProc
	strict      *vendorProc
	batch       *vendorProc
	// activity is the vendorsim behind the activity-adapter vendor.
	activity *vendorProc

	runs     *operator.Runs
	commands *operator.EpisodeCommands
	scheds   *operator.Schedules

	mu       sync.Mutex
	expected map[string]map[string]bool // pipeline -> keys whose start was acknowledged
	loadErrs []string
	humans   map[string]bool // pipeline/episode a person moved on
	// exhausted are the (budget, period)s that refused a step a person
	// then saw; budgetRefusals counts those episodes.
	exhausted      map[[2]string]bool
	budgetRefusals int
	// activityRefusals are those of chaos-daily, whose paid step goes to
	// the activity-adapter vendor.
	activityRefusals int

	requests, backfills, approvals, humanCommands atomic.Int64
	// Vendor controls: pauses given, the most episodes seen waiting for
	// the paused vendor, breaker trips seen; faultErrs are violations the
	// faults found (a paused vendor that got a submission).
	vendorPauses, pausedWaits, vendorTrips atomic.Int64
	// pausedRequests are the requests paused vendors got after the grace.
	pausedRequests atomic.Int64
	faultErrs      []string
	// chaos-catchup's schedule ran over (catchUpFrom, catchUpUntil];
	// workersOutages counts the times every worker was down at once.
	catchUpFrom, catchUpUntil time.Time
	workersOutages            atomic.Int64
}

// Run runs the chaos test and returns what it found. An error means the
// run could not be carried out; violations are in the summary.
func Run(ctx context.Context, cfg Config) (sum Summary, err error) {
	sc := cfg.Scale
	if sc.Name == "" {
		return sum, errors.New("no scale given")
	}
	r := &run{cfg: cfg, sc: sc, start: time.Now(), expected: map[string]map[string]bool{}, humans: map[string]bool{}, exhausted: map[[2]string]bool{}}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	var plock sync.Mutex
	r.logf = func(format string, args ...any) {
		plock.Lock()
		defer plock.Unlock()
		fmt.Fprintf(progress, "chaos %6.1fs  %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
	}
	sum = Summary{Seed: cfg.Seed, Scale: sc.Name, Ledger: "sqlite"}

	r.dir = cfg.Dir
	tempDir := r.dir == ""
	if tempDir {
		if r.dir, err = os.MkdirTemp("", "allot-chaos-"); err != nil {
			return sum, err
		}
	} else if err = os.MkdirAll(r.dir, 0o755); err != nil {
		return sum, err
	}
	if r.dir, err = filepath.Abs(r.dir); err != nil {
		return sum, err
	}
	r.logf("run directory %s", r.dir)

	bins := cfg.Bins
	if bins.Worker == "" || bins.VendorSim == "" || bins.Starter == "" || bins.DevServer == "" || bins.ActivityVendor == "" {
		r.logf("building worker, vendorsim, starter, devserver and activityvendor")
		built, err := BuildBinaries(ctx, filepath.Join(r.dir, "bin"))
		if err != nil {
			return sum, err
		}
		bins = fillBins(bins, built)
	}
	if err := bins.check(true); err != nil {
		return sum, err
	}

	workers := cfg.Workers
	var dropDB func() error
	if cfg.Postgres != "" {
		sum.Ledger = "postgres"
		name := fmt.Sprintf("chaos_%d_%d", cfg.Seed, time.Now().Unix())
		if r.ledgerURL, dropDB, err = createDatabase(ctx, cfg.Postgres, name); err != nil {
			return sum, err
		}
		r.logf("ledger: PostgreSQL database %s", name)
		if workers == 0 {
			workers = 3
		}
	} else {
		r.ledgerURL = "sqlite:" + filepath.Join(r.dir, "allot.db")
		r.logf("ledger: SQLite %s (no --postgres: one worker)", r.ledgerURL)
		if workers == 0 {
			workers = 1
		}
	}
	sum.Workers = workers
	p := newPlan(cfg.Seed, sc, workers)
	sum.Plan = p.Digest
	if err := writeFile(filepath.Join(r.dir, "plan.txt"), planText(p)); err != nil {
		return sum, err
	}
	r.logf("plan %s: %d events (%s)", p.Digest, len(p.Events), filepath.Join(r.dir, "plan.txt"))

	r.st = newStack(r.dir, bins, r.logf)
	defer func() {
		r.st.shutdown()
		if r.led != nil {
			r.led.Close()
		}
		clean := err == nil && len(sum.Violations) == 0
		if clean && !cfg.Keep {
			if dropDB != nil {
				if derr := dropDB(); derr != nil {
					r.logf("drop the run's database: %v", derr)
				}
			}
			if tempDir {
				os.RemoveAll(r.dir)
			}
		} else {
			r.logf("kept for inspection: %s (logs in %s)", r.dir, filepath.Join(r.dir, "logs"))
			if dropDB != nil {
				r.logf("kept the database: %s", r.ledgerURL)
			}
		}
	}()
	if err := r.setUp(ctx, workers); err != nil {
		return sum, err
	}

	r.logf("load and faults for %s", sc.Load)
	approverCtx, stopApprover := context.WithCancel(ctx)
	approverDone := make(chan struct{})
	go func() { defer close(approverDone); r.approver(approverCtx) }()
	r.execute(ctx, p)

	r.logf("faults stop: every worker up, vendors without faults")
	if err := r.st.allWorkersUp(ctx, 2*time.Minute); err != nil {
		r.violation(&sum, "workers: %v", err)
	}
	if err := r.st.restartVendors(ctx, 0, false, false); err != nil {
		stopApprover()
		<-approverDone
		return sum, err
	}
	drainErr := r.drain(ctx)
	stopApprover()
	<-approverDone
	if drainErr != nil {
		r.violation(&sum, "drain: %v", drainErr)
	}

	r.logf("checking")
	if err := r.check(ctx, &sum); err != nil {
		return sum, err
	}
	sum.Requests = int(r.requests.Load())
	sum.Backfills = int(r.backfills.Load())
	sum.WorkerKills = int(r.st.kills.Load())
	sum.WorkerRestarts = int(r.st.workerRestarts.Load())
	sum.UnexpectedExits = int(r.st.unexpectedExits.Load())
	sum.VendorRestarts = int(r.st.vendorRestarts.Load())
	sum.TemporalRestarts = int(r.st.temporalRestarts.Load())
	sum.Approvals = int(r.approvals.Load())
	sum.HumanCommands = int(r.humanCommands.Load())
	sum.VendorPauses = int(r.vendorPauses.Load())
	sum.PausedWaits = int(r.pausedWaits.Load())
	sum.VendorTrips = int(r.vendorTrips.Load())
	r.mu.Lock()
	sum.Parked = len(r.humans)
	sum.BudgetRefusals = r.budgetRefusals
	sum.ActivityRefusals = r.activityRefusals
	for _, e := range r.loadErrs {
		r.logf("load request that never went through: %s", e)
	}
	r.mu.Unlock()
	sum.Duration = time.Since(r.start)
	for _, v := range sum.Violations {
		r.logf("VIOLATION %s", v)
	}
	return sum, nil
}

func fillBins(b, built Binaries) Binaries {
	if b.Worker == "" {
		b.Worker = built.Worker
	}
	if b.VendorSim == "" {
		b.VendorSim = built.VendorSim
	}
	if b.Starter == "" {
		b.Starter = built.Starter
	}
	if b.DevServer == "" {
		b.DevServer = built.DevServer
	}
	if b.ActivityVendor == "" {
		b.ActivityVendor = built.ActivityVendor
	}
	return b
}

func planText(p plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# plan %s\n", p.Digest)
	for _, e := range p.Events {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	return b.String()
}

func (r *run) violation(sum *Summary, format string, args ...any) {
	sum.Violations = append(sum.Violations, fmt.Sprintf(format, args...))
}

// setUp brings up the server, the vendors and the workers, and the
// schedules of the scheduled pipelines (paused: only backfills and manual
// starts run them, so the run does not depend on the wall clock).
func (r *run) setUp(ctx context.Context, workers int) error {
	r.logf("starting Temporal (devserver --no-worker)")
	if err := r.st.startTemporal(ctx); err != nil {
		return err
	}
	r.logf("Temporal at %s", r.st.frontend)
	var err error
	seed := int64(r.cfg.Seed % (1 << 62))
	r.vendor, err = r.st.addVendor("vendor", seed, fmt.Sprintf("chaos-vendor-key-%d", r.cfg.Seed), vendorFaults{
		Lose: 0.2, Fail: 0.2, Latency: 30 * time.Millisecond, TaskDuration: r.sc.TaskDuration,
		Bill: billFaults{Drop: billFaultRate, Wrong: billFaultRate, Double: billFaultRate, Refund: billFaultRate, PhantomEvery: billPhantomEvery}})
	if err != nil {
		return err
	}
	r.strict, err = r.st.addVendor("vendor-strict", seed+1, fmt.Sprintf("chaos-strict-key-%d", r.cfg.Seed), vendorFaults{
		Lose: 0.35, Fail: 0.1, Latency: 30 * time.Millisecond, TaskDuration: r.sc.TaskDuration, NoLookup: true, IgnoreIdempotency: r.cfg.BrokenVendor})
	if err != nil {
		return err
	}
	// The activity-adapter vendor's simulator: responses lost and
	// submissions failed, so its adapter's outcome-unknown path is taken.
	r.activity, err = r.st.addVendor("vendor-activity", seed+2, fmt.Sprintf("chaos-activity-key-%d", r.cfg.Seed), vendorFaults{
		Lose: 0.2, Fail: 0.1, Latency: 30 * time.Millisecond, TaskDuration: r.sc.TaskDuration})
	if err != nil {
		return err
	}
	// The batch vendor's simulator: batches that lose their create's
	// response, expire or are cancelled half way (items finished before
	// are billed), besides lost and failed single requests.
	r.batch, err = r.st.addVendor("vendor-batch", seed+3, fmt.Sprintf("chaos-batch-key-%d", r.cfg.Seed), vendorFaults{
		Lose: 0.1, Fail: 0.1, Latency: 30 * time.Millisecond, TaskDuration: r.sc.TaskDuration,
		Batch: batchFaults{Duration: BatchDuration, LoseCreate: batchLoseCreate, Expire: batchExpire, Cancel: batchCancel}})
	if err != nil {
		return err
	}
	for _, v := range r.st.vendors {
		if err := v.start(ctx, true); err != nil {
			return err
		}
	}
	if err := r.st.startAdapter(ctx, "activityvendor", ActivityVendorQueue, r.activity); err != nil {
		return fmt.Errorf("start the activity-adapter vendor's worker: %w", err)
	}
	r.logf("vendors at %s, %s (no lookup), %s (through activities on %s) and %s (batches)", r.vendor.url, r.strict.url, r.activity.url, ActivityVendorQueue, r.batch.url)

	r.pipesPath = filepath.Join(r.dir, "pipelines.toml")
	r.deadlineDue = time.Now().Add(DeadlineAfter).Truncate(time.Second)
	if err := writeFile(r.pipesPath, pipelinesTOML(r.sc, r.strict.url, r.batch.url, r.deadlineDue)); err != nil {
		return err
	}
	if r.pipelines, err = pipeline.Load(r.pipesPath); err != nil {
		return err
	}
	noConfig := filepath.Join(r.dir, "no-temporal-config.toml")
	r.env = append(cleanEnv(),
		"TEMPORAL_ADDRESS="+r.st.frontend,
		"TEMPORAL_NAMESPACE=default",
		"TEMPORAL_CONFIG_FILE="+noConfig,
		"ALLOT_LEDGER="+r.ledgerURL,
		"ALLOT_PIPELINES="+r.pipesPath,
		"ALLOT_DATA_DIR="+filepath.Join(r.dir, "data"),
		"ALLOT_VENDOR_URL="+r.vendor.url,
		"ALLOT_VENDOR_API_KEY="+r.vendor.key,
		StrictVendorKeyEnv+"="+r.strict.key,
		BatchVendorKeyEnv+"="+r.batch.key,
	)
	r.st.addWorkers(workers, r.env)
	// The first worker migrates the ledger; then the others join.
	if err := r.st.startWorker(ctx, 0); err != nil {
		return err
	}
	for i := 1; i < workers; i++ {
		if err := r.st.startWorker(ctx, i); err != nil {
			return err
		}
	}
	r.st.monitor()
	r.logf("%d workers up", workers)

	if r.led, err = ledger.OpenReadOnly(ctx, r.ledgerURL); err != nil {
		return err
	}
	c := r.st.client
	r.runs = &operator.Runs{Client: c, Pipelines: r.pipelines, TaskQueue: workflows.TaskQueue, LedgerID: r.led.ID()}
	r.commands = &operator.EpisodeCommands{Client: c, Pipelines: r.pipelines, TaskQueue: workflows.TaskQueue, Ledger: r.led}
	r.scheds = &operator.Schedules{Client: c, Pipelines: r.pipelines, TaskQueue: workflows.TaskQueue, Namespace: "default", Ledger: r.led, LedgerID: r.led.ID()}
	for _, name := range []string{PipelineVideo, PipelineReview, PipelineDaily} {
		if _, err := r.scheds.Create(ctx, operator.ScheduleInput{Pipeline: name, Paused: true, Note: "chaos run: backfills only", By: "chaos"}); err != nil {
			return err
		}
	}
	return nil
}

// execute runs the plan's events at their times and waits for the load
// requests to go through (each is retried until acknowledged, as a user
// would, for at most a minute after the load ends).
func (r *run) execute(ctx context.Context, p plan) {
	begin := time.Now()
	giveUp := begin.Add(r.sc.Load + time.Minute)
	if _, err := r.scheds.Create(ctx, operator.ScheduleInput{Pipeline: PipelineCatchUp, Note: "chaos run: catch-up across a workers outage", By: "chaos"}); err != nil {
		r.loadError("create the schedule of %s: %v", PipelineCatchUp, err)
	}
	r.catchUpFrom = time.Now()
	var wg sync.WaitGroup
	var faults sync.WaitGroup
	for _, e := range p.Events {
		sleep(ctx, time.Until(begin.Add(e.At)))
		if ctx.Err() != nil {
			break
		}
		switch e.Kind {
		case evKill:
			faults.Add(1)
			go func() {
				defer faults.Done()
				if r.st.killWorker(ctx, e.Worker, e.Down) {
					r.logf("killed worker-%d (SIGKILL), back after %s", e.Worker, e.Down.Round(time.Millisecond))
				}
			}()
		case evWorkersOutage:
			faults.Add(1)
			go func() {
				defer faults.Done()
				r.logf("every worker down (SIGKILL) for %s, across %s's scheduled times", e.Down.Round(time.Millisecond), PipelineCatchUp)
				var all sync.WaitGroup
				for i := range r.st.workers {
					all.Add(1)
					go func() { defer all.Done(); r.st.killWorker(ctx, i, e.Down) }()
				}
				all.Wait()
				r.workersOutages.Add(1)
			}()
		case evCatchUpPause:
			// The window ends one interval before the pause is asked for:
			// a time that falls while the request is on its way, or that
			// the server's scheduler has not acted on yet (it lags under
			// load), may find the schedule paused, and a paused schedule's
			// times are settled when it is unpaused (starter schedule
			// unpause), which this run never does.
			r.catchUpUntil = time.Now().Add(-CatchUpInterval)
			if _, err := r.scheds.Pause(ctx, PipelineCatchUp, operator.ScheduleNote{By: "chaos", Text: "chaos run: the load of " + PipelineCatchUp + " is over"}); err != nil {
				r.loadError("pause the schedule of %s: %v", PipelineCatchUp, err)
			}
		case evVendorRestart:
			faults.Add(1)
			go func() {
				defer faults.Done()
				r.logf("vendors killed (SIGKILL), back after %s", e.Down.Round(time.Millisecond))
				if err := r.st.restartVendors(ctx, e.Down, true, true); err != nil {
					r.logf("vendor restart: %v", err)
				}
				r.st.vendorRestarts.Add(1)
			}()
		case evVendorPause:
			faults.Add(1)
			go func() { defer faults.Done(); r.pauseVendor(ctx, e.Vendor, e.Down) }()
		case evVendorOutage:
			faults.Add(1)
			go func() { defer faults.Done(); r.vendorOutage(ctx, e.Down) }()
		case evTemporalRestart:
			faults.Add(1)
			go func() {
				defer faults.Done()
				r.logf("Temporal server stopping (SIGTERM) for a restart")
				t0 := time.Now()
				if err := r.st.restartTemporal(ctx, e.Down); err != nil {
					r.logf("Temporal restart: %v", err)
					return
				}
				r.logf("Temporal server back after %s", time.Since(t0).Round(100*time.Millisecond))
			}()
		default:
			wg.Add(1)
			go func() { defer wg.Done(); r.load(ctx, e, giveUp) }()
		}
	}
	sleep(ctx, time.Until(begin.Add(r.sc.Load)))
	faults.Wait()
	r.logf("load phase over; waiting for the last requests")
	wg.Wait()
}

// load carries out one load event.
func (r *run) load(ctx context.Context, e event, giveUp time.Time) {
	switch e.Kind {
	case evBackfill:
		var res operator.BackfillResult
		err := r.retry(ctx, giveUp, func(ctx context.Context) error {
			var err error
			// The fast backfill, `starter schedule backfill`'s default:
			// allot starts the runs itself; a retry after a failure or
			// a timeout resumes it (the times already run are done).
			res, err = r.scheds.BackfillDirect(ctx, operator.BackfillInput{Pipeline: e.Pipeline, From: e.From, To: e.To, Yes: true, NoWait: true})
			return err
		})
		r.backfills.Add(1)
		if err != nil {
			r.loadError("backfill %s [%s, %s): %v", e.Pipeline, e.From.Format(time.RFC3339), e.To.Format(time.RFC3339), err)
			return
		}
		r.expect(e.Pipeline, res.Keys...)
	case evManual, evDupScheduled:
		key := allot.AllocationKey(e.Pipeline, e.Nominal)
		if e.Key != "" {
			key = allot.KeyPrefix(e.Pipeline) + e.Key
		}
		var wg sync.WaitGroup
		for _, via := range e.Via {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.requests.Add(1)
				err := r.retry(ctx, giveUp, func(ctx context.Context) error { return r.startRun(ctx, via, e, key) })
				if err != nil {
					r.loadError("start %s via %s: %v", key, via, err)
					return
				}
				r.expect(e.Pipeline, key)
			}()
		}
		wg.Wait()
	}
}

// startRun starts (or finds) the run of key one way.
func (r *run) startRun(ctx context.Context, via string, e event, key string) error {
	switch via {
	case viaStarter:
		args := []string{"run", "--pipeline", e.Pipeline, "--nominal-time", e.Nominal.Format(time.RFC3339), "--json"}
		if e.Key != "" {
			args = append(args, "--key", e.Key)
		}
		_, err := r.starter(ctx, args...)
		return err
	case viaSDK:
		opts := workflows.ScheduledRunStartOptions(operator.RunReusePolicy, workflows.ScheduledRunStart{Pipeline: e.Pipeline, Run: allot.RunKey{Key: key, Nominal: e.Nominal}, TaskQueue: workflows.TaskQueue})
		_, err := r.st.client.ExecuteWorkflow(ctx, opts, workflows.ScheduledRunWorkflow,
			workflows.ScheduledRunInput{Pipeline: e.Pipeline, NominalTime: e.Nominal, LedgerID: r.led.ID()})
		var already *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &already) {
			return nil // the key ran and finished: a finished key is never run again
		}
		return err
	default:
		_, err := r.runs.Run(ctx, operator.RunInput{Pipeline: e.Pipeline, NominalTime: e.Nominal, Key: e.Key})
		return err
	}
}

func (r *run) expect(pipelineName string, keys ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.expected[pipelineName] == nil {
		r.expected[pipelineName] = map[string]bool{}
	}
	for _, k := range keys {
		r.expected[pipelineName][k] = true
	}
}

func (r *run) loadError(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loadErrs = append(r.loadErrs, fmt.Sprintf(format, args...))
}

// retry calls fn until it succeeds or giveUp has passed, one second apart:
// what a user does while the server restarts.
func (r *run) retry(ctx context.Context, giveUp time.Time, fn func(context.Context) error) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, 45*time.Second)
		err := fn(cctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(giveUp) {
			return err
		}
		sleep(ctx, time.Second)
	}
}

// starter runs the real starter binary with the run's environment and
// returns its standard output.
func (r *run) starter(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.st.bins.Starter, args...)
	cmd.Env = r.env
	cmd.Dir = r.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("starter %s: %v: %s", strings.Join(args, " "), err, oneLine(stderr.String()+" "+stdout.String(), 400))
	}
	return stdout.String(), nil
}

// approver is the operator of chaos-review: every episode waiting at its
// approval gate is approved, half through the operator API and half with
// the starter binary.
func (r *run) approver(ctx context.Context) {
	n := 0
	for ctx.Err() == nil {
		eps, err := r.led.ListEpisodes(ctx, PipelineReview, "")
		if err == nil {
			for _, ep := range eps {
				if allot.Outcome(ep.Outcome) != allot.OutcomeWaitingApproval || ctx.Err() != nil {
					continue
				}
				n++
				var err error
				if n%2 == 0 {
					_, err = r.starter(ctx, "episode", "approve", "--pipeline", PipelineReview, "--episode", ep.ID, "--reason", "chaos driver approves", "--json")
				} else {
					cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					_, err = r.commands.Send(cctx, operator.CommandInput{Pipeline: PipelineReview, EpisodeID: ep.ID, Update: workflows.ApproveUpdate,
						Request: workflows.DecisionRequest{Reason: "chaos driver approves"}})
					cancel()
				}
				if err == nil {
					r.approvals.Add(1)
				}
			}
		}
		sleep(ctx, 1500*time.Millisecond)
	}
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// listWorkflows lists every execution a visibility query finds.
func listWorkflows(ctx context.Context, c client.Client, query string) ([]*workflowExecution, error) {
	var out []*workflowExecution
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default", Query: query, PageSize: 1000, NextPageToken: token})
		if err != nil {
			return nil, err
		}
		for _, e := range resp.GetExecutions() {
			we := &workflowExecution{ID: e.GetExecution().GetWorkflowId(), RunID: e.GetExecution().GetRunId(), Status: e.GetStatus(), Start: e.GetStartTime().AsTime()}
			if e.GetCloseTime() != nil {
				we.Close = e.GetCloseTime().AsTime()
			}
			out = append(out, we)
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			return out, nil
		}
	}
}

type workflowExecution struct {
	ID, RunID    string
	Status       enumspb.WorkflowExecutionStatus
	Start, Close time.Time
}

// episodeTimes is, per Episode workflow ID, from its first start to its
// last close, for the IDs whose executions have all closed.
func episodeTimes(execs []*workflowExecution) []time.Duration {
	type span struct {
		start, close time.Time
		open         bool
	}
	spans := map[string]*span{}
	for _, e := range execs {
		s := spans[e.ID]
		if s == nil {
			s = &span{start: e.Start}
			spans[e.ID] = s
		}
		if e.Start.Before(s.start) {
			s.start = e.Start
		}
		if e.Close.IsZero() {
			s.open = true
		} else if e.Close.After(s.close) {
			s.close = e.Close
		}
	}
	var out []time.Duration
	for _, s := range spans {
		if !s.open && !s.close.IsZero() {
			out = append(out, s.close.Sub(s.start))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	i = min(max(i, 0), len(sorted)-1)
	return sorted[i]
}

// decodeJSON decodes a starter --json output.
func decodeJSON(out string, v any) error {
	dec := json.NewDecoder(strings.NewReader(out))
	return dec.Decode(v)
}

// oneLine squeezes s onto one line of at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}
