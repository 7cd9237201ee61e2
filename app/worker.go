package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"allot/activities"
	"allot/internal/catchup"
	"allot/internal/deadline"
	"allot/internal/forecast"
	"allot/internal/ledger"
	"allot/internal/metrics"
	"allot/internal/reconcile"
	"allot/paidvendor"
	"allot/pipeline"
	"allot/step"
	"allot/workflows"
)

// Register puts allot's workflows and activities on a worker, once.
func Register(r worker.Registry, acts *activities.Activities) {
	r.RegisterWorkflow(workflows.ScheduledRun)
	r.RegisterWorkflow(workflows.Episode)
	r.RegisterWorkflow(workflows.DeadlineWatch)
	r.RegisterWorkflow(workflows.BatchCollector)
	r.RegisterActivity(acts)
}

// WorkerConfig is what RunWorker needs.
type WorkerConfig struct {
	Config
	Temporal client.Options
	Logger   *slog.Logger
	// Credentials for the paid vendor; nil reads ALLOT_VENDOR_API_KEY or
	// ALLOT_VENDOR_API_KEY_FILE when a paid activity needs them. RunWorker
	// reads them once at start and refuses to start without them when a
	// paid or effect step uses the default vendor (likewise every named
	// vendor's key).
	Credentials paidvendor.CredentialsSource
	// MetricsAddr, when set, serves Prometheus metrics at /metrics there.
	MetricsAddr string
	// NamespaceSource names what set Temporal.Namespace, for the error
	// when it does not exist (NamespaceSource; "": from the environment).
	NamespaceSource string
	// MetricsReady, when set, gets the address the metrics server bound.
	MetricsReady func(addr string)
	// AutoApprove makes every pipeline pass its approval steps (the demo).
	AutoApprove bool
	// ReconcileEvery is how often the worker reconciles its vendors'
	// bills with the ledger; 0: reconcile.Every; negative: never.
	ReconcileEvery time.Duration

	// Steps are your Go steps: a pipeline step with kind = "go" and
	// func = "NAME" runs Steps["NAME"]. allot's built-in steps (plan,
	// assemble, publish) are always there. Every worker on the task queue
	// must register the same steps: RunWorker refuses to start when a go
	// step of the pipelines file has no function here.
	Steps map[string]step.Func
	// Vendors are your Go vendor adapters: a [[vendor]] with
	// adapter = "go" and name = "NAME" is reached through Vendors["NAME"],
	// built with the API key its api_key_env or api_key_file names. allot
	// keeps the paid protocol around every call the adapter makes.
	Vendors map[string]paidvendor.Factory
}

// RunWorker opens the ledger, connects to Temporal and serves the task queue
// until ctx ends; then it stops the worker and closes what it opened. A
// stop is no failure, even one that comes while the worker still starts
// (an open or a dial cut short by ctx): RunWorker then returns nil.
func RunWorker(ctx context.Context, cfg WorkerConfig) (err error) {
	defer func() {
		if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			err = nil
		}
	}()
	cfg.Config = cfg.Config.WithDefaults()
	if err := cfg.Config.Validate(); err != nil {
		return err
	}
	// Checked before anything opens: a port out of range would otherwise
	// show only once the worker serves, as a listen error.
	if cfg.MetricsAddr != "" {
		if err := CheckListenPort("--metrics-addr", cfg.MetricsAddr); err != nil {
			return err
		}
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	pipelines, err := cfg.LoadPipelines()
	if err != nil {
		return err
	}
	if cfg.AutoApprove {
		pipelines = pipelines.WithAutoApprove()
	}
	if err := activities.CheckSteps(pipelines, cfg.Steps); err != nil {
		return err
	}
	vendors, err := activities.NamedVendors(pipelines, cfg.Vendors)
	if err != nil {
		return err
	}
	credentials := cfg.Credentials
	if credentials == nil {
		credentials = paidvendor.EnvCredentials{}
	}
	var defaultVendor *activities.Vendor
	if cfg.VendorURL != "" {
		defaultVendor = &activities.Vendor{Credentials: credentials}
	}
	// A vendor without its key would only show when the first paid
	// episode parks, after writing its intent: refuse to start instead.
	if err := activities.CheckVendorKeys(ctx, pipelines, vendors, defaultVendor); err != nil {
		return err
	}
	// What each vendor can promise, as this worker acts on it; a Go
	// adapter that declares what it cannot keep refuses the start
	// (docs/design.md, "What a vendor can promise").
	capabilities, err := activities.WorkerCapabilities(ctx, pipelines, vendors, defaultVendor)
	if err != nil {
		return err
	}
	led, err := ledger.Open(ctx, cfg.Ledger)
	if err != nil {
		return err
	}
	defer led.Close()
	if led.Created() {
		// Only the worker creates a ledger (the starter's commands refuse
		// one that does not exist): say so, so that a mistyped
		// ALLOT_LEDGER shows.
		logger.Info("created a new ledger", "ledger", RedactURL(cfg.Ledger))
	}
	// A damaged SQLite file would only show when a read runs into the
	// damage, perhaps half-way through a decision: refuse to start.
	if err := led.CheckIntegrity(ctx); err != nil {
		return err
	}
	// A ledger the worker cannot write would only show when the first
	// allocation retries forever: refuse to start instead.
	if err := led.CheckWritable(ctx); err != nil {
		return fmt.Errorf("the worker needs a writable ledger: %w", err)
	}
	// A budget whose currency, period or zone the file changed while the
	// ledger holds its spend would count that spend as free: refuse to
	// start instead (docs/design.md, "Budgets").
	if err := led.CheckBudgetShapes(ctx, pipelines.Budgets()); err != nil {
		return err
	}
	// The limits this worker enforces, per vendor, go in the ledger so
	// that `starter vendor list` and `episode show` show what the workers
	// act on, not the asking process's environment (docs/design.md,
	// "Vendor controls").
	if err := led.RecordLimitsOf(ctx, pipelines, workerIdentity()); err != nil {
		return fmt.Errorf("record the vendor limits this worker enforces: %w", err)
	}
	if err := led.RecordVendorCapabilities(ctx, workerIdentity(), capabilities, time.Time{}); err != nil {
		return fmt.Errorf("record what this worker's vendors can promise: %w", err)
	}

	opts := cfg.Temporal
	if opts.Logger == nil {
		opts.Logger = tlog.NewStructuredLogger(logger)
	}
	billGauges := newBillState()
	// dialed is the Temporal client once the worker has one: the
	// forecast reads the live Schedules through it.
	var dialed atomic.Pointer[client.Client]
	if cfg.MetricsAddr != "" {
		gauges := LedgerGauges(led, pipelines)
		gauges.Bills = billGauges.gauges
		if len(pipelines.Budgets()) > 0 {
			gauges.Forecasts = forecastGauge(led, pipelines, &dialed)
		}
		m := metrics.New(gauges, logger)
		defer m.Close()
		opts.MetricsHandler = m.Handler()
		mctx, stopMetrics := context.WithCancel(ctx)
		defer stopMetrics()
		go func() {
			if err := m.Serve(mctx, cfg.MetricsAddr, cfg.MetricsReady); err != nil {
				logger.Error("metrics server stopped", "error", err)
			}
		}()
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		if ctx.Err() != nil {
			// Stopped while still connecting: a clean stop, not a failure.
			return nil
		}
		return ConnectError(err, opts, "start the dev server with `go run ./devserver`, or set TEMPORAL_ADDRESS")
	}
	defer c.Close()
	dialed.Store(&c)
	source := cfg.NamespaceSource
	if source == "" {
		source = NamespaceSource("")
	}
	if err := CheckNamespace(ctx, c, opts, source); err != nil {
		return err
	}

	acts := &activities.Activities{
		Temporal:     c,
		Ledger:       led,
		Pipelines:    pipelines,
		ArtifactsDir: filepath.Join(cfg.DataDir, "artifacts"),
		Steps:        cfg.Steps,
		Vendors:      vendors,
		SecretEnv:    activities.VendorKeyEnv(pipelines),
		// Batch steps' items go to their vendor's collector workflow.
		EnqueueBatch: func(ctx context.Context, e activities.BatchEnqueue) error {
			return workflows.EnqueueBatchItem(ctx, c, e)
		},
	}
	acts.Deadlines = &deadline.Watcher{Ledger: led, Pipelines: pipelines, Sources: DeadlineSources(c, pipelines)}
	if cfg.VendorURL != "" {
		acts.Credentials = credentials
		acts.NewVendor = paidvendor.HTTPClientFactory(cfg.VendorURL)
	}
	logger.Info("allot worker starting", "task_queue", cfg.TaskQueue, "ledger", RedactURL(cfg.Ledger),
		"pipelines", pipelines.Names(), "vendor", cfg.VendorURL, "vendors", pipelines.VendorNames(), "go_steps", slices.Sorted(maps.Keys(cfg.Steps)), "temporal", hostPort(opts), "namespace", opts.Namespace)
	// While the worker serves: each pipeline's deadline is declared and
	// its watch started; the times Temporal will not start any more are
	// settled every catchup.SweepEvery; the vendors' bills are reconciled;
	// the budgets hold for their scheduled runs (forecast.HoldEvery).
	// The loops use the ledger: it is closed after they have returned.
	var loops sync.WaitGroup
	defer loops.Wait()
	loops.Go(func() { deadlineDeclarer(c, led, pipelines, cfg.TaskQueue, logger).Run(ctx) })
	sweeper := &catchup.Sweeper{Client: c, Pipelines: pipelines, Ledger: led, TaskQueue: cfg.TaskQueue, LedgerID: led.ID(), Logger: logger}
	loops.Go(func() { sweeper.Run(ctx) })
	holds := &forecast.HoldKeeper{Input: forecast.Input{Ledger: led, Pipelines: pipelines, Schedule: forecast.TemporalSchedules(c, pipelines)}, Logger: logger}
	loops.Go(func() { holds.Run(ctx) })
	if cfg.ReconcileEvery >= 0 {
		bills := &reconcile.Loop{
			Reconciler: &reconcile.Reconciler{Ledger: led, Pipelines: pipelines},
			Vendors:    reconcile.VendorsInput{Pipelines: pipelines, DefaultURL: cfg.VendorURL, DefaultKey: credentials, Adapters: cfg.Vendors},
			Every:      cfg.ReconcileEvery, Logger: logger, Results: billGauges.set,
		}
		loops.Go(func() { bills.Run(ctx) })
	}
	return Serve(ctx, c, cfg.TaskQueue, acts)
}

// billState is the reconciler's last pass per vendor, for the metrics.
type billState struct {
	mu       sync.Mutex
	last     map[string]reconcile.Result
	lastRead map[string]time.Time
}

func newBillState() *billState {
	return &billState{last: map[string]reconcile.Result{}, lastRead: map[string]time.Time{}}
}

func (b *billState) set(res []reconcile.Result) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range res {
		b.last[r.Vendor] = r
		if r.Reconciled {
			b.lastRead[r.Vendor] = r.At
		}
	}
}

// gauges are the bills' metrics: one per vendor the reconciler has run
// for, reconciled as of its last pass.
func (b *billState) gauges(context.Context) ([]metrics.BillGauge, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]metrics.BillGauge, 0, len(b.last))
	for _, name := range slices.Sorted(maps.Keys(b.last)) {
		out = append(out, metrics.BillGauge{Vendor: name, Reconciled: b.last[name].Reconciled, LastRead: b.lastRead[name]})
	}
	return out, nil
}

// LedgerGauges are the metrics gauges read from the ledger for the
// pipelines of set: episodes needing attention, episodes stalled past
// their pipeline's stall_after, the budgets' limits, settled and
// reserved amounts, and the periods judged against a deadline
// (docs/design.md, "Period deadlines").
func LedgerGauges(led *ledger.Ledger, set *pipeline.Set) metrics.Gauges {
	g := metrics.Gauges{
		Pipelines:           set.Names(),
		NeedingAttention:    led.EpisodesNeedingAttention,
		WaitingPausedVendor: led.EpisodesWaitingOnPausedVendor,
		Stalled: func(ctx context.Context) (map[string]int, error) {
			return led.CountStalled(ctx, set.StallAfter, time.Now())
		},
		Vendors: func(ctx context.Context) ([]metrics.VendorGauge, error) {
			return VendorGauges(ctx, led, set)
		},
		Drift: func(ctx context.Context) ([]metrics.DriftGauge, error) {
			ts, err := led.DriftTotals(ctx)
			out := make([]metrics.DriftGauge, len(ts))
			for i, t := range ts {
				out[i] = metrics.DriftGauge{Vendor: t.Vendor, Class: string(t.Class), Currency: t.Currency, Count: t.Count, Amount: t.Amount}
			}
			return out, err
		},
		// Every pipeline that declares a deadline is exported, 0 when it
		// has no records yet; any other the ledger has records of too.
		Deadlines: func(ctx context.Context) (metrics.Deadlines, error) {
			var out metrics.Deadlines
			for _, name := range set.Names() {
				if p, err := set.Get(name); err == nil && p.HasDeadline() {
					out.Pipelines = append(out.Pipelines, name)
				}
			}
			totals, err := led.DeadlineTotals(ctx)
			if err != nil {
				return metrics.Deadlines{}, err
			}
			for _, t := range totals {
				out.Periods = append(out.Periods, metrics.DeadlinePeriods{Pipeline: t.Pipeline, Kind: string(t.Kind), Count: t.Count})
			}
			open, err := led.LateOpen(ctx)
			if err != nil {
				return metrics.Deadlines{}, err
			}
			out.LateOpen = map[string]int{}
			for _, r := range open {
				out.LateOpen[r.Pipeline]++
			}
			return out, nil
		},
	}
	if len(set.Budgets()) > 0 {
		g.Budgets = func(ctx context.Context) ([]metrics.Budget, error) {
			now := time.Now()
			current := map[string]string{} // budget -> its period now
			for _, b := range set.Budgets() {
				current[b.Name] = b.PeriodOf(now)
			}
			ps, err := led.GaugedBudgetPeriods(ctx, set.Budgets(), now)
			out := make([]metrics.Budget, len(ps))
			for i, p := range ps {
				out[i] = metrics.Budget{Budget: p.Budget, Period: p.Period, Currency: p.Currency, Limit: p.Limit, Settled: p.Settled, Reserved: p.Reserved,
					HeldForSchedule: p.HeldForSchedule, Free: p.Free, Current: current[p.Budget] == p.Period}
			}
			return out, err
		}
	}
	return g
}

// VendorGauges are the vendors' states for the metrics: every vendor of
// set (active when the ledger has nothing of it) and any other the ledger
// has state of.
func VendorGauges(ctx context.Context, led *ledger.Ledger, set *pipeline.Set) ([]metrics.VendorGauge, error) {
	ss, err := led.VendorStates(ctx, time.Now())
	if err != nil {
		return nil, err
	}
	byName := map[string]ledger.VendorState{}
	for _, s := range ss {
		byName[s.Vendor] = s
	}
	var out []metrics.VendorGauge
	add := func(s ledger.VendorState) {
		out = append(out, metrics.VendorGauge{Vendor: s.Vendor, State: s.Status(), InFlight: s.InFlightSend + s.InFlightPoll, Failures: s.Failures})
	}
	for _, name := range set.ControlledVendors() {
		s, ok := byName[name]
		if !ok {
			s = ledger.VendorState{Vendor: name}
		}
		delete(byName, name)
		add(s)
	}
	for _, s := range ss {
		if _, ok := byName[s.Vendor]; ok {
			add(s)
		}
	}
	return out, nil
}

// Serve runs a worker for the task queue until ctx ends.
func Serve(ctx context.Context, c client.Client, taskQueue string, acts *activities.Activities) error {
	w := NewWorker(c, taskQueue, acts)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker on task queue %q: %w", taskQueue, err)
	}
	<-ctx.Done()
	w.Stop()
	return nil
}

// Worker is an allot worker: its workflows and acts registered, with
// allot's worker options, and a Stop that returns once the attempts it
// cancelled have.
type Worker struct {
	worker.Worker
	attempts *stoppedAttempts
}

// NewWorker makes a worker for the task queue; it polls from Start.
func NewWorker(c client.Client, taskQueue string, acts *activities.Activities) *Worker {
	attempts := &stoppedAttempts{}
	w := &Worker{Worker: worker.New(c, taskQueue, workerOptions(attempts)), attempts: attempts}
	Register(w, acts)
	return w
}

// Stop stops polling and waits, up to StopGrace, for the attempts the
// stop cancelled: the SDK's Stop returns without waiting for them, and
// the caller closes the ledger and files they write once Stop returns
// (stoppedAttempts).
func (w *Worker) Stop() {
	w.Worker.Stop()
	wait, cancel := context.WithTimeout(context.Background(), StopGrace)
	defer cancel()
	if !w.attempts.wait(wait) {
		slog.Warn("activity attempts still running after the worker's stop; what they use is closed under them", "waited", StopGrace)
	}
}

// StopGrace is how long Serve waits, after its worker's stop, for the
// attempts the stop cancelled to return: they watch their context, so
// only code that ignores it (a Go step's) takes this long.
const StopGrace = 30 * time.Second

func hostPort(opts client.Options) string {
	if opts.HostPort == "" {
		return client.DefaultHostPort
	}
	return opts.HostPort
}

// workerIdentity names this worker process as Temporal's default identity
// does (pid@host), for the limits it records.
func workerIdentity() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%d@%s", os.Getpid(), host)
}

// forecastGauge forecasts every budget's current period for the metrics
// (docs/design.md, "The forecast"): through the worker's Temporal client
// once it has one (the live Schedules, paused ones starting nothing), from
// the pipelines file's schedules before.
func forecastGauge(led *ledger.Ledger, set *pipeline.Set, dialed *atomic.Pointer[client.Client]) func(ctx context.Context) ([]metrics.Forecast, error) {
	return func(ctx context.Context) ([]metrics.Forecast, error) {
		in := forecast.Input{Ledger: led, Pipelines: set}
		if c := dialed.Load(); c != nil {
			in.Schedule = forecast.TemporalSchedules(*c, set)
		}
		ps, err := forecast.Budgets(ctx, in)
		if err != nil {
			return nil, err
		}
		out := make([]metrics.Forecast, len(ps))
		for i, p := range ps {
			out[i] = metrics.Forecast{Budget: p.Budget, Period: p.Period, Currency: p.Currency, Forecast: p.Forecast, Unbounded: p.Unbounded, RefusedRuns: p.Refused}
		}
		return out, nil
	}
}
