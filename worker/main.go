// Command worker runs allot's Temporal worker: it connects with envconfig,
// opens the ledger and serves the task queue until SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"allot/app"
)

func main() {
	cfg := app.ConfigFromEnv()
	var address, namespace string
	flag.StringVar(&cfg.Ledger, "ledger", cfg.Ledger, "ledger: sqlite:PATH or a postgres:// URL (env "+app.EnvLedger+", default "+app.DefaultLedger+")")
	flag.StringVar(&cfg.Pipelines, "pipelines", cfg.Pipelines, "pipeline file (env "+app.EnvPipelines+"; default: the embedded demo pipelines)")
	flag.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory for artifacts (env "+app.EnvDataDir+", default data)")
	flag.StringVar(&cfg.TaskQueue, "task-queue", cfg.TaskQueue, "task queue (env "+app.EnvTaskQueue+", default allot)")
	flag.StringVar(&cfg.VendorURL, "vendor-url", cfg.VendorURL, "paid vendor base URL (env "+app.EnvVendorURL+"); its key comes from ALLOT_VENDOR_API_KEY or ALLOT_VENDOR_API_KEY_FILE")
	var metricsAddr string
	flag.StringVar(&metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://HOST:PORT/metrics (off by default)")
	flag.StringVar(&address, "address", "", "Temporal frontend host:port (default: TEMPORAL_ADDRESS or 127.0.0.1:7233)")
	flag.StringVar(&namespace, "namespace", "", "Temporal namespace (default: TEMPORAL_NAMESPACE or default)")
	flag.Parse()
	if metricsAddr != "" {
		if err := app.CheckListenPort("--metrics-addr", metricsAddr); err != nil {
			fmt.Fprintf(os.Stderr, "allot worker: %v, e.g. `go run ./worker %s`\n", err, strings.Join(app.WithFlag(os.Args[1:], "--metrics-addr", "127.0.0.1:9090"), " "))
			os.Exit(2)
		}
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	app.WarnUnknownEnv(logger, os.Environ())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	opts, err := app.TemporalOptions(address, namespace, logger)
	if err == nil {
		err = app.RunWorker(ctx, app.WorkerConfig{Config: cfg, Temporal: opts, Logger: logger, MetricsAddr: metricsAddr, NamespaceSource: app.NamespaceSource(namespace)})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "allot worker:", err)
		os.Exit(1)
	}
	logger.Info("allot worker stopped")
}
