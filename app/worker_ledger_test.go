package app_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"allot/activities"
	"allot/app"
	"allot/ledger"
)

// A ledger the worker cannot write used to be found only when the first
// allocation retried forever (and `run --wait` hung): the worker now
// refuses to start, before it connects to Temporal, and names the fix.
func TestWorkerRefusesALedgerItCannotWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "allot.db")
	led, err := ledger.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	led.Close()
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
			t.Skipf("running as root without chattr +i (%v: %s): cannot make the ledger read-only", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("chattr", "-i", path).Run() })
	} else if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = app.RunWorker(ctx, app.WorkerConfig{
		Config:      app.Config{Ledger: "sqlite:" + path, DataDir: dir, VendorURL: "http://127.0.0.1:1"},
		Temporal:    client.Options{HostPort: "127.0.0.1:1"}, // never reached
		Credentials: activities.NewStaticCredentials("test-key"),
	})
	if err == nil || !strings.Contains(err.Error(), "cannot be written") || !strings.Contains(err.Error(), "writable by the worker's user") ||
		strings.Contains(err.Error(), "connect to Temporal") {
		t.Fatalf("RunWorker on a read-only ledger = %v, want a refusal naming the fix before connecting", err)
	}
}
