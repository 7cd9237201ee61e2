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
