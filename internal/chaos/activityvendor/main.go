// Command activityvendor is the chaos run's activity-adapter vendor: a
// Temporal worker that registers paidvendor.ActivityAdapter's activities on
// the vendor's task queue, each forwarding one request to a vendor's HTTP
// API (in the chaos run a vendorsim, whose /v1/stats and /v1/charges then
// count every request and charge as for the http vendors). A [[vendor]]
// with adapter = "activity" and this task queue reaches it.
//
//	ALLOT_VENDOR_API_KEY=... activityvendor --temporal-address 127.0.0.1:7233 --task-queue chaos-activity-vendor --vendor-url http://127.0.0.1:8788
//
// Flags:
//
//	--temporal-address HOST:PORT  the Temporal frontend (required)
//	--namespace NS                default "default"
//	--task-queue Q                the vendor's task_queue (required)
//	--vendor-url URL              the vendor API's base URL (required); its key is in ALLOT_VENDOR_API_KEY
//	--submit, --lookup, --status, --fetch NAME
//	                              the activity types (default submit, lookup, status, fetch; "" leaves one out)
//	--timeout D                   bound of one request (default 10s)
//
// It exits 1 when it cannot reach Temporal at start (the chaos run starts
// it again), 2 on a bad flag; SIGINT or SIGTERM stops it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"allot/paidvendor"
)

// Ready is the line it logs once its worker polls the task queue.
const Ready = "activity vendor worker started"

type options struct {
	temporal, namespace, taskQueue, vendorURL string
	names                                     paidvendor.ActivityNames
	timeout                                   time.Duration
}

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stderr))
}

func run(args []string, getenv func(string) string, stderr io.Writer) int {
	opts, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "activityvendor: %v\n", err)
		return 2
	}
	key := getenv(paidvendor.EnvVendorAPIKey)
	vendor, err := paidvendor.NewHTTPClient(opts.vendorURL, key, &http.Client{Timeout: opts.timeout})
	if err != nil {
		fmt.Fprintf(stderr, "activityvendor: %v (the key is read from %s)\n", err, paidvendor.EnvVendorAPIKey)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := client.DialContext(ctx, client.Options{HostPort: opts.temporal, Namespace: opts.namespace,
		Logger: tlog.NewStructuredLogger(logger.With("component", "temporal"))})
	if err != nil {
		logger.Error("activityvendor: cannot reach Temporal", "address", opts.temporal, "error", err)
		return 1
	}
	defer c.Close()
	// Activities only: the vendor's queue has no workflow tasks to poll for.
	w := worker.New(c, opts.taskQueue, worker.Options{DisableWorkflowWorker: true})
	(&paidvendor.ActivityAdapter{Client: vendor}).Register(w, opts.names)
	if err := w.Start(); err != nil {
		logger.Error("activityvendor: worker did not start", "error", err)
		return 1
	}
	logger.Info(Ready, "task_queue", opts.taskQueue, "vendor", vendor.BaseURL())
	<-ctx.Done()
	w.Stop()
	return 0
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("activityvendor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.temporal, "temporal-address", "", "the Temporal frontend `HOST:PORT` (required)")
	fs.StringVar(&o.namespace, "namespace", "default", "Temporal `NS`")
	fs.StringVar(&o.taskQueue, "task-queue", "", "the vendor's task queue `Q` (required)")
	fs.StringVar(&o.vendorURL, "vendor-url", "", "the vendor API's base `URL` (required); its key is in "+paidvendor.EnvVendorAPIKey)
	fs.StringVar(&o.names.Submit, "submit", "submit", "submit activity type `NAME`")
	fs.StringVar(&o.names.Lookup, "lookup", "lookup", "look-up activity type `NAME` (\"\": none)")
	fs.StringVar(&o.names.Status, "status", "status", "status activity type `NAME`")
	fs.StringVar(&o.names.Fetch, "fetch", "fetch", "fetch activity type `NAME`")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "bound `D` of one request to the vendor")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q: it takes flags only (see --help)", fs.Arg(0))
	case o.temporal == "" || o.taskQueue == "" || o.vendorURL == "":
		return o, errors.New("give --temporal-address, --task-queue and --vendor-url")
	case o.names.Submit == "":
		return o, errors.New("--submit: an activity adapter needs a submit activity")
	case o.timeout <= 0:
		return o, fmt.Errorf("--timeout must be positive, got %s", o.timeout)
	}
	return o, nil
}
