// Command devserver runs a Temporal server and its Web UI in one process,
// with state in a SQLite file under --data-dir, and allot's custom search
// attributes registered in the namespace.
//
//	go run ./devserver                      # frontend :7233, UI http://127.0.0.1:8233
//	go run ./devserver --headless --port 7300 --data-dir /tmp/allot-temporal
//
// Stop it with Ctrl+C (SIGINT) or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"allot/temporalserver"
	"allot/workflows"
)

func main() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(logger); err != nil {
		logger.Error("devserver failed", "error", err)
		os.Exit(1)
	}
}

func run(logger *slog.Logger) error {
	port := flag.Int("port", temporalserver.DefaultPort, "frontend gRPC port")
	uiPort := flag.Int("ui-port", temporalserver.DefaultUIPort, "Web UI HTTP port")
	dataDir := flag.String("data-dir", "./data", "directory of the SQLite file ("+temporalserver.DBFileName+"), kept across restarts")
	namespace := flag.String("namespace", temporalserver.DefaultNamespace, "namespace to create (if missing) and register search attributes in")
	headless := flag.Bool("headless", false, "run without the Web UI")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", flag.Args())
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	srv, err := temporalserver.Start(ctx, temporalserver.Config{
		DataDir:          *dataDir,
		Port:             *port,
		UIPort:           *uiPort,
		DisableUI:        *headless,
		Namespace:        *namespace,
		SearchAttributes: workflows.SearchAttributeTypes(),
		Logger:           logger,
	})
	if err != nil {
		if ctx.Err() != nil {
			logger.Info("interrupted while starting")
			return nil
		}
		return err
	}

	ui := srv.UIAddress()
	if ui == "" {
		ui = "disabled (--headless)"
	}
	fmt.Printf("Temporal dev server is running\n"+
		"  frontend:  %s  (namespace %q)\n"+
		"  Web UI:    %s\n"+
		"  data:      %s\n"+
		"Press Ctrl+C (or send SIGTERM) to stop.\n",
		srv.FrontendAddress(), srv.Namespace(), ui, filepath.Join(*dataDir, temporalserver.DBFileName))

	<-ctx.Done()
	stop() // a second Ctrl+C kills the process the usual way
	logger.Info("stopping Temporal dev server")
	if err := srv.Stop(); err != nil {
		return err
	}
	logger.Info("stopped")
	return nil
}
