// Command vendorsim runs the simulated paid vendor (paidvendortest.Simulator) as
// an HTTP server, for local development and integration tests.
//
//	go run ./vendorsim --addr 127.0.0.1:8787 --lose-response-after-accept 0.2 --state /tmp/vendor.json
//
// The API key it accepts comes from --api-key, else the environment variable
// ALLOT_VENDOR_API_KEY, else the development default "dev-vendor-key". Prefer
// the environment variable: a command-line flag is visible to every user of
// the machine in the process list. The key is never logged.
//
// Flags:
//
//	--addr HOST:PORT                    listen address (default 127.0.0.1:8787)
//	--lose-response-after-accept P      probability a submission is accepted and charged, then its response dropped
//	--fail-before-accept P              probability a submission gets HTTP 503, nothing charged
//	--latency D                         delay added to every request
//	--task-duration D                   time for a task to go queued -> running -> succeeded (default 3s)
//	--no-lookup                         the lookup-by-idempotency-key endpoint answers 501
//	--ignore-idempotency                every submission creates and charges a new task (a bad vendor)
//	--api-key K                         the bearer token to accept (see above)
//	--seed N                            seed of the fault sequence (default 1)
//	--state FILE                        keep tasks, the bill and its planted faults in FILE across restarts
//	--bill-drop-charge P                probability an accepted task's charge line is left off the bill (a missing charge)
//	--bill-wrong-amount P               probability its charge line bills another amount than the task's cost
//	--bill-double-charge P              probability it is billed twice under the same idempotency key
//	--bill-refund P                     probability the bill refunds its whole cost
//	--bill-phantom-every N              one charge line for a task that never existed per N accepted tasks (0 = never)
//	--batch-duration D                  time for a batch to do all its items (default 1m)
//	--batch-retention D                 time a batch's result files stay readable after it ends (default 29 days)
//	--batch-lose-create-response P      probability a batch is created and its create's response dropped
//	--batch-expire-halfway P            probability a batch expires after half its items
//	--batch-cancel-halfway P            probability the vendor cancels a batch after half its items
//	--batch-output-gone P               probability a batch's output file answers 410
//
// It also speaks a batch API shaped like OpenAI's and Anthropic's
// (POST /v1/batches, no idempotency key; items billed at half price as
// they finish, also before an expiry or cancel): see package vendorapi.
//
// The four --bill-* probabilities add up to at most 1: an accepted task
// meets at most one of them, drawn from a source seeded by --seed (apart
// from the other faults', whose sequence they leave as it was).
//
// GET /v1/stats (with the same key) reports what it saw: the most requests
// served at once, the requests and submissions, and the most submissions
// within one second. GET /v1/bill-faults lists every bill fault planted
// (kind, task, idempotency key, line), so a checker can compare them with
// the drift allot found.
//
// A bad flag value exits with status 2. SIGINT or SIGTERM stops it cleanly.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"allot/paidvendor/paidvendortest"
)

const (
	// DevAPIKey is used when neither --api-key nor ALLOT_VENDOR_API_KEY is set.
	DevAPIKey = paidvendortest.DevAPIKey
	// APIKeyEnv names the environment variable holding the key.
	APIKeyEnv   = "ALLOT_VENDOR_API_KEY"
	defaultAddr = "127.0.0.1:8787"

	shutdownTimeout = 10 * time.Second
)

type options struct {
	addr      string
	keySource string // where the key came from, for the log; never the key
	sim       paidvendortest.SimConfig
}

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stderr))
}

func run(args []string, getenv func(string) string, stderr io.Writer) int {
	opts, err := parseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		if !errors.Is(err, errAlreadyReported) {
			fmt.Fprintf(stderr, "vendorsim: %v\n", err)
		}
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, opts, logger, nil); err != nil {
		logger.Error("vendorsim stopped", "error", err)
		return 1
	}
	return 0
}

// errAlreadyReported marks a flag error the flag package has printed.
var errAlreadyReported = errors.New("flag error already reported")

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("vendorsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		opts                options
		lose, fail          float64
		latency, taskDur    time.Duration
		noLookup, ignoreIdm bool
		apiKey, state       string
		seed                int64
		bill                struct{ drop, wrong, double, refund float64 }
		phantomEvery        int
		batch               struct{ lose, expire, cancel, gone float64 }
		batchDur, batchKeep time.Duration
	)
	fs.StringVar(&opts.addr, "addr", defaultAddr, "listen address `HOST:PORT`")
	fs.Float64Var(&lose, "lose-response-after-accept", 0, "probability `P` in [0,1] that a submission is accepted and charged, then its response is dropped")
	fs.Float64Var(&fail, "fail-before-accept", 0, "probability `P` in [0,1] that a submission gets HTTP 503 and nothing is charged")
	fs.DurationVar(&latency, "latency", 0, "delay `D` added to every request")
	fs.DurationVar(&taskDur, "task-duration", 3*time.Second, "time `D` for a task to go queued -> running -> succeeded")
	fs.BoolVar(&noLookup, "no-lookup", false, "the lookup-by-idempotency-key endpoint answers 501")
	fs.BoolVar(&ignoreIdm, "ignore-idempotency", false, "every submission creates and charges a new task (a bad vendor)")
	// No default shown on purpose: --help must not print a key from the environment.
	fs.StringVar(&apiKey, "api-key", "", "bearer token `K` to accept (default: $"+APIKeyEnv+", else the development key \""+DevAPIKey+"\"); prefer the environment variable, flags show in the process list")
	fs.Int64Var(&seed, "seed", 1, "seed `N` of the fault sequence")
	fs.StringVar(&state, "state", "", "keep tasks, the bill and its planted faults in `FILE` across restarts")
	fs.Float64Var(&bill.drop, "bill-drop-charge", 0, "probability `P` in [0,1] that an accepted task's charge line is left off the bill")
	fs.Float64Var(&bill.wrong, "bill-wrong-amount", 0, "probability `P` in [0,1] that an accepted task's charge line bills another amount than its cost")
	fs.Float64Var(&bill.double, "bill-double-charge", 0, "probability `P` in [0,1] that an accepted task is billed twice under its idempotency key")
	fs.Float64Var(&bill.refund, "bill-refund", 0, "probability `P` in [0,1] that the bill refunds an accepted task's cost")
	fs.IntVar(&phantomEvery, "bill-phantom-every", 0, "one charge line for a task that never existed per `N` accepted tasks (0 = never)")
	fs.DurationVar(&batchDur, "batch-duration", time.Minute, "time `D` for a batch to do all its items (they finish evenly spread over it)")
	fs.DurationVar(&batchKeep, "batch-retention", paidvendortest.DefaultBatchRetention, "time `D` a batch's result files stay readable after it ends")
	fs.Float64Var(&batch.lose, "batch-lose-create-response", 0, "probability `P` in [0,1] that a batch is created, then its create's response is dropped")
	fs.Float64Var(&batch.expire, "batch-expire-halfway", 0, "probability `P` in [0,1] that a batch expires after doing half its items")
	fs.Float64Var(&batch.cancel, "batch-cancel-halfway", 0, "probability `P` in [0,1] that the vendor cancels a batch after doing half its items")
	fs.Float64Var(&batch.gone, "batch-output-gone", 0, "probability `P` in [0,1] that a batch's output file cannot be read (410)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return options{}, err
		}
		return options{}, errAlreadyReported
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected argument %q: vendorsim takes flags only (see --help)", fs.Arg(0))
	}
	if _, _, err := net.SplitHostPort(opts.addr); err != nil {
		return options{}, fmt.Errorf("--addr %q is not HOST:PORT: %v", opts.addr, err)
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"--lose-response-after-accept", lose}, {"--fail-before-accept", fail},
		{"--bill-drop-charge", bill.drop}, {"--bill-wrong-amount", bill.wrong}, {"--bill-double-charge", bill.double}, {"--bill-refund", bill.refund},
		{"--batch-lose-create-response", batch.lose}, {"--batch-expire-halfway", batch.expire}, {"--batch-cancel-halfway", batch.cancel}, {"--batch-output-gone", batch.gone}} {
		if math.IsNaN(p.v) || p.v < 0 || p.v > 1 {
			return options{}, fmt.Errorf("%s must be a probability between 0 and 1, got %v", p.name, p.v)
		}
	}
	if sum := bill.drop + bill.wrong + bill.double + bill.refund; sum > 1 {
		return options{}, fmt.Errorf("--bill-drop-charge, --bill-wrong-amount, --bill-double-charge and --bill-refund add up to %v: a task meets at most one bill fault, so keep their sum at most 1", sum)
	}
	if phantomEvery < 0 {
		return options{}, fmt.Errorf("--bill-phantom-every must not be negative (0 plants no phantom), got %d", phantomEvery)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--latency", latency}, {"--task-duration", taskDur}, {"--batch-duration", batchDur}, {"--batch-retention", batchKeep}} {
		if d.v < 0 {
			return options{}, fmt.Errorf("%s must not be negative, got %v", d.name, d.v)
		}
	}
	if batchKeep == 0 {
		return options{}, errors.New("--batch-retention must be above 0: it is how long a batch's results stay readable (the real vendors keep them 29 or 30 days)")
	}
	switch {
	case apiKey != "":
		opts.keySource = "flag --api-key"
	case getenv(APIKeyEnv) != "":
		apiKey, opts.keySource = getenv(APIKeyEnv), "environment "+APIKeyEnv
	default:
		apiKey, opts.keySource = DevAPIKey, "development default"
	}
	for i := 0; i < len(apiKey); i++ {
		if c := apiKey[i]; c <= ' ' || c >= 0x7f {
			return options{}, fmt.Errorf("the API key (from %s) has a space, control or non-ASCII byte at position %d: clients cannot send it in a header", opts.keySource, i)
		}
	}
	opts.sim = paidvendortest.SimConfig{
		APIKey:                  apiKey,
		LoseResponseAfterAccept: lose,
		FailBeforeAccept:        fail,
		Latency:                 latency,
		TaskDuration:            taskDur,
		NoLookup:                noLookup,
		IgnoreIdempotency:       ignoreIdm,
		Seed:                    seed,
		StateFile:               state,
		BillDropCharge:          bill.drop,
		BillWrongAmount:         bill.wrong,
		BillDoubleCharge:        bill.double,
		BillRefund:              bill.refund,
		BillPhantomEvery:        phantomEvery,
		BatchDuration:           batchDur,
		BatchRetention:          batchKeep,
		BatchLoseCreateResponse: batch.lose,
		BatchExpireHalfway:      batch.expire,
		BatchCancelHalfway:      batch.cancel,
		BatchOutputGone:         batch.gone,
	}
	return opts, nil
}

// serve runs the simulator until ctx ends, then shuts the server down. If
// ready is not nil it receives the listening address.
func serve(ctx context.Context, opts options, logger *slog.Logger, ready chan<- string) error {
	cfg := opts.sim
	cfg.Logger = logger
	sim, err := paidvendortest.OpenSimulator(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", opts.addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", opts.addr, err)
	}
	srv := &http.Server{
		Handler:           sim,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if opts.keySource == "development default" {
		logger.Warn("vendorsim: accepting the documented development API key; set " + APIKeyEnv + " for anything shared")
	}
	if opts.keySource == "flag --api-key" {
		logger.Warn("vendorsim: API key given on the command line is visible in the process list; prefer " + APIKeyEnv)
	}
	logger.Info("vendorsim: listening",
		"addr", ln.Addr().String(),
		"api_key_from", opts.keySource,
		"lose_response_after_accept", cfg.LoseResponseAfterAccept,
		"fail_before_accept", cfg.FailBeforeAccept,
		"latency", cfg.Latency,
		"task_duration", cfg.TaskDuration,
		"no_lookup", cfg.NoLookup,
		"ignore_idempotency", cfg.IgnoreIdempotency,
		"seed", cfg.Seed,
		"state", cfg.StateFile,
		"bill_drop_charge", cfg.BillDropCharge,
		"bill_wrong_amount", cfg.BillWrongAmount,
		"bill_double_charge", cfg.BillDoubleCharge,
		"bill_refund", cfg.BillRefund,
		"bill_phantom_every", cfg.BillPhantomEvery,
		"tasks", sim.TaskCount(),
		"charges", sim.ChargeCount(),
	)
	if ready != nil {
		ready <- ln.Addr().String()
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	logger.Info("vendorsim: shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", err)
	}
	logger.Info("vendorsim: stopped", "tasks", sim.TaskCount(), "charges", sim.ChargeCount(), "bill_faults", len(sim.BillFaults()))
	return nil
}
