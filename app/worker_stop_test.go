package app_test

import (
	"allot/paidvendor"
	"context"
	"net"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"allot/app"
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
	time.Sleep(500 * time.Millisecond)
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
