// Command devserver is allot's one command on embedded defaults: a Temporal
// server with its Web UI, the simulated paid vendor and the allot worker, all
// in one process with their state under --data-dir, kept across restarts.
//
//	go run ./devserver                  # frontend 127.0.0.1:7233, UI http://127.0.0.1:8233
//	go run ./devserver --headless --port 7300 --data-dir /tmp/allot
//	go run ./devserver --no-worker      # the server and Web UI only, for your own workers
//
// Stop it with Ctrl+C (SIGINT) or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"allot/app"
	"allot/internal/console"
	"allot/internal/devstack"
	"allot/internal/temporalserver"
)

func main() {
	cfg := devstack.Config{Pipelines: os.Getenv(app.EnvPipelines)}
	flag.IntVar(&cfg.Port, "port", temporalserver.DefaultPort, "Temporal frontend gRPC port (-1: any free port)")
	flag.IntVar(&cfg.UIPort, "ui-port", temporalserver.DefaultUIPort, "Web UI HTTP port (-1: any free port)")
	flag.IntVar(&cfg.VendorPort, "vendor-port", devstack.DefaultVendorPort, "simulated paid vendor HTTP port (-1: any free port)")
	flag.StringVar(&cfg.DataDir, "data-dir", app.DefaultDataDir, "directory for Temporal's, the ledger's and the vendor's state")
	flag.StringVar(&cfg.Pipelines, "pipelines", cfg.Pipelines, "pipeline file (env "+app.EnvPipelines+"; default: the embedded demo)")
	flag.BoolVar(&cfg.Headless, "headless", false, "run without the Web UI")
	flag.StringVar(&cfg.DemoPipeline, "demo-pipeline", devstack.DemoPipeline, "pipeline to put on the demo schedule")
	flag.DurationVar(&cfg.DemoInterval, "demo-interval", 10*time.Second, "demo schedule interval (0: no demo schedule)")
	flag.BoolVar(&cfg.AutoApprove, "auto-approve", true, "approval steps pass by themselves (demo); --auto-approve=false to approve with starter")
	flag.StringVar(&cfg.MetricsAddr, "metrics-addr", "", "serve the worker's Prometheus metrics at HOST:PORT/metrics (off by default)")
	flag.StringVar(&cfg.ConsoleAddr, "console-addr", console.DefaultAddr, "serve the operator page (spend, forecast, what needs a human) at this loopback HOST:PORT (\"\": off)")
	flag.StringVar(&cfg.ConsoleTokens, "console-tokens", "", "the operator page's token file (NAME:TOKEN lines, mode 0600; default: DATA-DIR/console-tokens, made with an operator \"dev\" if missing)")
	flag.BoolVar(&cfg.NoWorker, "no-worker", false, "run the server and Web UI only: no simulated vendor, worker, ledger or demo schedule")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "devserver: unexpected arguments %q: every value goes with a flag\n", flag.Args())
		os.Exit(2)
	}
	for _, f := range []struct{ name, addr, example string }{{"--console-addr", cfg.ConsoleAddr, console.DefaultAddr}, {"--metrics-addr", cfg.MetricsAddr, "127.0.0.1:9090"}} {
		if f.addr == "" {
			continue
		}
		if err := app.CheckListenPort(f.name, f.addr); err != nil {
			fmt.Fprintf(os.Stderr, "devserver: %v, e.g. `go run ./devserver %s`\n", err, strings.Join(app.WithFlag(os.Args[1:], f.name, f.example), " "))
			os.Exit(2)
		}
	}
	app.WarnUnknownEnv(logger, os.Environ())
	cfg.Logger = logger
	cfg.Ready = func(info devstack.Info) { printWhereToLook(cfg, info) }

	// The embedded server takes seconds to come up (more on a busy
	// machine): say so, so that a silent terminal is not taken for a hang.
	fmt.Printf("starting allot with its state in %s ...\n", cfg.DataDir)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := devstack.Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "devserver:", err)
		os.Exit(1)
	}
	fmt.Println("allot stopped")
}

// printWhereToLook tells the user where everything runs. The tests of
// internal/devstack read the "Temporal:" line to find the frontend.
func printWhereToLook(cfg devstack.Config, info devstack.Info) {
	ui := info.WebUI
	if ui == "" {
		ui = "disabled (--headless)"
	}
	if cfg.NoWorker {
		fmt.Printf("Temporal is running (--no-worker: no allot worker, vendor, ledger or schedule)\n"+
			"  Web UI:    %s\n"+
			"  Temporal:  %s (namespace %s)\n"+
			"  try:       TEMPORAL_ADDRESS=%s go run ./worker\n"+
			"Press Ctrl+C to stop; run it again to resume where it left off.\n",
			ui, info.Frontend, info.Namespace, info.Frontend)
		return
	}
	fmt.Printf("allot is running\n"+
		"  Web UI:    %s\n"+
		"  page:      %s\n"+
		"  episodes:  %s/namespaces/%s/workflows?query=%s\n"+
		"  Temporal:  %s (namespace %s)\n"+
		"  vendor:    %s (simulated)\n"+
		"  ledger:    %s\n",
		ui, consoleOr(info), ui, info.Namespace, url.QueryEscape(`AllotPipeline="`+cfg.DemoPipeline+`" AND WorkflowType="Episode"`),
		info.Frontend, info.Namespace, info.VendorURL, info.Ledger)
	switch {
	case info.ScheduleCreated:
		fmt.Printf("  schedule:  %s, every %s\n", info.Schedule, cfg.DemoInterval)
	case info.Schedule != "":
		fmt.Printf("  schedule:  %s, as last left (created once per data directory; see `starter schedule describe`)\n", info.Schedule)
	}
	if info.Metrics != "" {
		fmt.Printf("  metrics:   %s\n", info.Metrics)
	}
	fmt.Printf("  try:       go run ./starter episodes --pipeline %s\n"+
		"Press Ctrl+C to stop; run it again to resume where it left off.\n", cfg.DemoPipeline)
}

// consoleOr is the operator page's URL and where its tokens are, or why
// there is none.
func consoleOr(info devstack.Info) string {
	if info.Console == "" {
		return "off (--console-addr \"\")"
	}
	return info.Console + " (spend, forecast and what needs a human; to act, sign in with a token of " + info.ConsoleTokens + ")"
}
