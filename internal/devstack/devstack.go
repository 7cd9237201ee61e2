// Package devstack is allot's one-command development setup: an embedded
// Temporal server with its Web UI, the simulated paid vendor over HTTP, the
// allot worker and a demo schedule, in one process, all keeping their state
// under one directory so a restart resumes where it stopped.
//
// It is a package of its own, and internal, because it links the Temporal
// server (about 300 packages) and the simulated vendor: only devserver/ and
// tests import it, so the production worker and starter binaries link
// neither.
package devstack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"allot/app"
	"allot/artifacts"
	"allot/internal/console"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/internal/temporalserver"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/pipeline"
	"allot/workflows"
)

// DefaultVendorPort is the simulated vendor's port when Config names none.
const DefaultVendorPort = 8787

// Config is the one-command setup on embedded defaults: a Temporal server
// with its Web UI, the simulated paid vendor and the worker, all keeping
// their state under DataDir.
type Config struct {
	DataDir    string // default "data"
	Host       string // default 127.0.0.1
	Port       int    // Temporal frontend; default 7233, -1 = any free port
	UIPort     int    // Web UI; default 8233, -1 = any free port
	Headless   bool   // no Web UI
	VendorPort int    // simulated vendor; default 8787, -1 = any free port
	Pipelines  string // pipeline file; "" = embedded demo
	// DemoPipeline is put on a schedule firing every DemoInterval (0: no
	// schedule); its approvals pass by themselves when AutoApprove is set.
	DemoPipeline string
	DemoInterval time.Duration
	AutoApprove  bool
	MetricsAddr  string // Prometheus /metrics of the worker; "" = off
	// ConsoleAddr serves the operator page (starter console) there, a
	// loopback host:port; "" = off.
	ConsoleAddr string
	// ConsoleTokens is the page's operator token file: its operators
	// act on the page. "" is DataDir/console-tokens, made with one
	// operator, "dev", if it is not there.
	ConsoleTokens string
	// ReconcileEvery is how often the worker reconciles the vendor's bill
	// (0: its default, a minute).
	ReconcileEvery time.Duration
	// VendorBillPhantomEvery plants a charge for a task that never existed
	// on the simulated vendor's bill after every this many accepted tasks
	// (0: never): a drift item to see reconciliation find.
	VendorBillPhantomEvery int
	// NoWorker runs the server and its Web UI only: no simulated vendor,
	// no worker, no ledger, no demo schedule, for workers of one's own.
	NoWorker bool
	Logger   *slog.Logger
	// Ready is called once everything runs, with where to look.
	Ready func(Info)
}

// Info says where the running pieces are.
type Info struct {
	Frontend  string `json:"frontend"`
	Namespace string `json:"namespace"`
	WebUI     string `json:"web_ui,omitempty"`
	VendorURL string `json:"vendor_url,omitempty"` // "" with NoWorker
	Ledger    string `json:"ledger,omitempty"`     // "" with NoWorker
	DataDir   string `json:"data_dir"`
	// Schedule is the demo schedule's ID, if one runs; ScheduleCreated
	// says this start created it (else it is as the operator left it).
	Schedule        string `json:"schedule,omitempty"`
	ScheduleCreated bool   `json:"schedule_created,omitempty"`
	// Metrics is the worker's /metrics URL, if served.
	Metrics string `json:"metrics,omitempty"`
	// Console is the operator page's URL, if served, and ConsoleTokens
	// the token file its operators sign in with.
	Console       string `json:"console,omitempty"`
	ConsoleTokens string `json:"console_tokens,omitempty"`
}

// Run runs the embedded setup until ctx ends, then stops the worker, the
// vendor and the server, in that order. Started again on the same DataDir it
// resumes: the ledger, the vendor's charges and Temporal's state persist.
func Run(ctx context.Context, cfg Config) error {
	if cfg.DataDir == "" {
		cfg.DataDir = app.DefaultDataDir
	}
	if cfg.Host == "" {
		cfg.Host = temporalserver.DefaultHost
	}
	if cfg.VendorPort == 0 {
		cfg.VendorPort = DefaultVendorPort
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	srv, err := temporalserver.Start(ctx, temporalserver.Config{
		DataDir: cfg.DataDir, Host: cfg.Host, Port: cfg.Port, UIPort: cfg.UIPort, DisableUI: cfg.Headless,
		SearchAttributes: workflows.SearchAttributeTypes(), Logger: logger,
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			logger.Error("stopping the Temporal server", "error", err)
		}
	}()
	if cfg.NoWorker {
		// The server and the Web UI only: a hidden worker of ours would
		// compete with the user's own for the task queue's tasks.
		if cfg.Ready != nil {
			cfg.Ready(Info{Frontend: srv.FrontendAddress(), Namespace: srv.Namespace(), WebUI: srv.UIAddress(), DataDir: cfg.DataDir})
		}
		<-ctx.Done()
		return nil
	}

	vendorURL, stopVendor, err := startVendor(cfg, logger)
	if err != nil {
		return err
	}
	defer stopVendor()

	wcfg := app.WorkerConfig{
		Config: app.Config{
			DataDir: cfg.DataDir, Pipelines: cfg.Pipelines, VendorURL: vendorURL,
		}.WithDefaults(),
		Temporal:       client.Options{HostPort: srv.FrontendAddress(), Namespace: srv.Namespace()},
		Logger:         logger,
		Credentials:    paidvendor.NewStaticCredentials(paidvendortest.DevAPIKey),
		AutoApprove:    cfg.AutoApprove,
		MetricsAddr:    cfg.MetricsAddr,
		ReconcileEvery: cfg.ReconcileEvery,
	}
	info := Info{
		Frontend: srv.FrontendAddress(), Namespace: srv.Namespace(), WebUI: srv.UIAddress(),
		VendorURL: vendorURL, Ledger: wcfg.Ledger, DataDir: cfg.DataDir,
	}
	metricsAddr := make(chan string, 1)
	if cfg.MetricsAddr != "" {
		wcfg.MetricsReady = func(addr string) { metricsAddr <- addr }
	}
	wctx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	workerDone := make(chan error, 1)
	go func() { workerDone <- app.RunWorker(wctx, wcfg) }()
	if cfg.MetricsAddr != "" {
		select {
		case addr := <-metricsAddr:
			info.Metrics = "http://" + addr + "/metrics"
		case err := <-workerDone:
			return fmt.Errorf("worker stopped: %w", err)
		}
	}
	consoleDone := make(chan error, 1)
	if cfg.ConsoleAddr != "" {
		if err := console.CheckAddr(cfg.ConsoleAddr, false); err != nil {
			stopWorker()
			<-workerDone
			return err
		}
		consoleAddr := make(chan string, 1)
		info.ConsoleTokens = cmp.Or(cfg.ConsoleTokens, filepath.Join(cfg.DataDir, "console-tokens"))
		go func() { consoleDone <- serveConsole(wctx, cfg, wcfg, info, consoleAddr, logger) }()
		select {
		case addr := <-consoleAddr:
			info.Console = "http://" + addr + "/"
		case err := <-consoleDone:
			stopWorker()
			<-workerDone
			return fmt.Errorf("operator page: %w", err)
		case err := <-workerDone:
			stopWorker()
			<-consoleDone
			return fmt.Errorf("worker stopped: %w", err)
		}
	}
	// Run returns once the worker and the page have stopped: both hold the
	// process's one handle on the ledger (docs/design.md, "How allot opens
	// a SQLite ledger"), and a Run after this one must not share a handle
	// a stopping page still holds.
	pageStopped := func() {
		if cfg.ConsoleAddr != "" {
			<-consoleDone
		}
	}
	if cfg.DemoInterval > 0 {
		if info.Schedule, info.ScheduleCreated, err = ensureDemoSchedule(ctx, cfg, wcfg.Config, info); err != nil {
			stopWorker()
			<-workerDone
			pageStopped()
			return err
		}
	}
	if cfg.Ready != nil {
		cfg.Ready(info)
	}
	select {
	case <-ctx.Done():
		stopWorker()
		err := <-workerDone
		pageStopped()
		return err
	case err := <-workerDone:
		stopWorker()
		pageStopped()
		return fmt.Errorf("worker stopped: %w", err)
	case err := <-consoleDone:
		stopWorker()
		<-workerDone
		return fmt.Errorf("operator page stopped: %w", err)
	}
}

// serveConsole serves the operator page on cfg.ConsoleAddr until ctx ends,
// reading the worker's ledger (read-only, once the worker has created it)
// and the embedded server; ready gets the address it listens on.
func serveConsole(ctx context.Context, cfg Config, wcfg app.WorkerConfig, info Info, ready chan<- string, logger *slog.Logger) error {
	pipelines, err := wcfg.LoadPipelines()
	if err != nil {
		return err
	}
	tokens := info.ConsoleTokens
	if _, err := os.Stat(tokens); errors.Is(err, fs.ErrNotExist) {
		if err := console.AddOperator(tokens, "dev"); err != nil {
			return err
		}
	}
	creds, err := console.LoadCredentials(tokens)
	if err != nil {
		return err
	}
	ro, err := openWhenCreated(ctx, wcfg.Ledger)
	if err != nil {
		return err
	}
	ro.Close()
	// Written by the page's actions, as by the starter's commands.
	led, err := ledger.OpenExisting(ctx, wcfg.Ledger)
	if err != nil {
		return err
	}
	defer led.Close()
	c, err := client.DialContext(ctx, client.Options{HostPort: info.Frontend, Namespace: info.Namespace, Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return err
	}
	defer c.Close()
	actions := &console.Actions{Ledger: led, Pipelines: pipelines, Temporal: c,
		Episodes:  &operator.EpisodeCommands{Client: c, Pipelines: pipelines, TaskQueue: wcfg.TaskQueue, Ledger: led},
		Schedules: &operator.Schedules{Client: c, Pipelines: pipelines, TaskQueue: wcfg.TaskQueue, LedgerID: led.ID(), Namespace: info.Namespace, HoldLedger: led},
	}
	return console.Serve(ctx, console.ServerConfig{
		Addr:        cfg.ConsoleAddr,
		Read:        console.ReadInput{Ledger: led, Pipelines: pipelines, Temporal: c, Namespace: info.Namespace, WebUI: info.WebUI},
		Credentials: creds,
		Actions:     actions,
		Ready:       func(addr string) { ready <- addr },
		Logger:      logger,
	})
}

// openWhenCreated opens the ledger read-only once the worker, which
// creates it, has: until then it is not there to read.
func openWhenCreated(ctx context.Context, url string) (*ledger.Ledger, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		led, err := ledger.OpenReadOnly(ctx, url)
		if !errors.Is(err, ledger.ErrNotCreated) {
			return led, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// ensureDemoSchedule puts the demo pipeline on a fast schedule the first
// time the dev setup runs on its data directory, so a fresh machine shows
// runs within seconds; the short catch-up window keeps a restart from
// replaying every missed tick. A marker file in the data directory records
// that it was created: later starts leave the schedule as the operator
// left it (updated, paused or deleted) and only report it if it exists.
func ensureDemoSchedule(ctx context.Context, cfg Config, wcfg app.Config, info Info) (id string, created bool, err error) {
	pipelines, err := wcfg.LoadPipelines()
	if err != nil {
		return "", false, err
	}
	name := cfg.DemoPipeline
	if name == "" {
		name = DemoPipeline
	}
	if _, err := pipelines.Get(name); err != nil {
		return "", false, fmt.Errorf("demo schedule: %w (choose one with --demo-pipeline, or --demo-interval 0 for none)", err)
	}
	c, err := client.DialContext(ctx, client.Options{HostPort: info.Frontend, Namespace: info.Namespace, Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return "", false, err
	}
	defer c.Close()
	s := &operator.Schedules{Client: c, Pipelines: pipelines, TaskQueue: wcfg.TaskQueue, Namespace: info.Namespace}
	marker := filepath.Join(cfg.DataDir, DemoScheduleMarker(name))
	if _, err := os.Stat(marker); err == nil {
		res, err := whileSlow(ctx, func() (operator.ScheduleResult, error) { return s.Describe(ctx, name) })
		switch {
		case errors.Is(err, operator.ErrNoSchedule):
			return "", false, nil // deleted by the operator: it stays deleted
		case err != nil:
			return "", false, fmt.Errorf("demo schedule: %w", err)
		}
		return res.ScheduleID, false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Errorf("demo schedule: %w", err)
	}
	res, err := whileSlow(ctx, func() (operator.ScheduleResult, error) {
		// Ensure again after a call that timed out: a create that did
		// happen is then updated to the same.
		return s.Ensure(ctx, operator.ScheduleInput{
			Pipeline: name,
			Override: pipeline.Schedule{Interval: cfg.DemoInterval.String(), CatchupWindow: pipeline.MinCatchupWindow.String()},
			Note:     "demo schedule of the dev setup",
			By:       "devserver",
		})
	})
	if err != nil {
		return "", false, fmt.Errorf("demo schedule: %w", err)
	}
	note := fmt.Sprintf("the dev setup created the schedule %s on %s; it is not created again in this data directory\n", res.ScheduleID, time.Now().UTC().Format(time.RFC3339))
	if _, err := artifacts.WriteFile(marker, []byte(note)); err != nil {
		return "", false, fmt.Errorf("demo schedule: record its creation: %w", err)
	}
	return res.ScheduleID, true, nil
}

// slowServerPatience bounds how long whileSlow asks again.
var slowServerPatience = time.Minute

// whileSlow calls call again, backing off, while it fails because the
// server did not answer within the client's call timeout: a devserver
// restarted on a loaded machine answers a schedule's Describe only once
// the scheduler's workflow runs a task, which took 6 s in a CI rehearsal,
// and the start must not fail for that. Any other error, the end of ctx,
// or slowServerPatience spent, returns at once.
func whileSlow[T any](ctx context.Context, call func() (T, error)) (T, error) {
	wait := 250 * time.Millisecond
	giveUp := time.Now().Add(slowServerPatience)
	for {
		res, err := call()
		var timedOut *serviceerror.DeadlineExceeded
		if err == nil || !(errors.Is(err, context.DeadlineExceeded) || errors.As(err, &timedOut)) || ctx.Err() != nil || time.Now().After(giveUp) {
			return res, err
		}
		select {
		case <-ctx.Done():
			return res, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 4*time.Second)
	}
}

// DemoScheduleMarker is the file in the data directory that records that
// the dev setup created the demo pipeline's schedule there.
func DemoScheduleMarker(pipelineName string) string {
	return ".demo-schedule-" + pipelineName + "-created"
}

// DemoPipeline is the embedded demo pipeline the dev setup schedules.
const DemoPipeline = "weekly-video"

// VendorStateFile is the simulated vendor's state file under DataDir.
const VendorStateFile = "vendorsim.json"

// startVendor serves the simulated paid vendor with its state file under
// DataDir, so charges survive a restart.
func startVendor(cfg Config, logger *slog.Logger) (string, func(), error) {
	sim, err := paidvendortest.OpenSimulator(paidvendortest.SimConfig{
		APIKey:           paidvendortest.DevAPIKey,
		TaskDuration:     3 * time.Second,
		Seed:             1,
		StateFile:        filepath.Join(cfg.DataDir, VendorStateFile),
		BillPhantomEvery: cfg.VendorBillPhantomEvery,
		Logger:           logger.With("component", "vendorsim"),
	})
	if err != nil {
		return "", nil, err
	}
	port := cfg.VendorPort
	if port < 0 {
		port = 0
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, fmt.Sprint(port)))
	if err != nil {
		return "", nil, fmt.Errorf("simulated vendor: listen on port %d: %w (choose another with --vendor-port)", port, err)
	}
	hs := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("simulated vendor stopped", "error", err)
		}
	}()
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	}
	return "http://" + ln.Addr().String(), stop, nil
}
