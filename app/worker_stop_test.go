package app_test

import (
	"context"
	"net"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"allot/app"
	"allot/paidvendor"
)

// A worker stopped while it is still connecting has stopped cleanly: the
// dev stack calls it ready before the worker's first poll, and a stop right
// then must not be reported as a failure to connect.
func TestWorkerStoppedWhileConnectingStopsCleanly(t *testing.T) {
	// A server that accepts connections and never answers: the dial
	// waits until the worker is stopped.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	connecting := make(chan struct{}) // closed when the worker's first connection arrived
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			if len(held) == 0 {
				close(connecting)
			}
			held = append(held, conn)
		}
	}()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- app.RunWorker(ctx, app.WorkerConfig{
			Config:      app.Config{Ledger: "sqlite:" + dir + "/allot.db", DataDir: dir, VendorURL: "http://127.0.0.1:1"},
			Temporal:    client.Options{HostPort: ln.Addr().String()},
			Credentials: paidvendor.NewStaticCredentials("test-key"),
		})
	}()
	// Stopped while its dial waits for an answer.
	select {
	case <-connecting:
	case err := <-done:
		t.Fatalf("RunWorker returned before it connected: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunWorker stopped while connecting = %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunWorker did not stop")
	}
}

// A worker stopped before its ledger is open has stopped cleanly too (the
// dev stack's test stopped one while SQLite still opened the file, and
// RunWorker reported "ledger ...: context canceled"); a refusal that has
// nothing to do with the stop is still reported.
func TestWorkerStoppedWhileOpeningItsLedgerStopsCleanly(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg := app.WorkerConfig{
		Config:      app.Config{Ledger: "sqlite:" + dir + "/allot.db", DataDir: dir, VendorURL: "http://127.0.0.1:1"},
		Temporal:    client.Options{HostPort: "127.0.0.1:1"},
		Credentials: paidvendor.NewStaticCredentials("test-key"),
	}
	if err := app.RunWorker(ctx, cfg); err != nil {
		t.Fatalf("RunWorker stopped before its ledger opened = %v, want nil", err)
	}
	cfg.Pipelines = dir + "/no-such-pipelines.toml"
	if err := app.RunWorker(ctx, cfg); err == nil {
		t.Fatal("RunWorker with a pipelines file that does not exist, stopped = nil, want the refusal")
	}
}
