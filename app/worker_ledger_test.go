package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"allot/app"
	"allot/internal/ledger"
	"allot/internal/patience"
	"allot/paidvendor"
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
	ctx, cancel := patience.Context(t, 30*time.Second)
	defer cancel()
	err = app.RunWorker(ctx, app.WorkerConfig{
		Config:      app.Config{Ledger: "sqlite:" + path, DataDir: dir, VendorURL: "http://127.0.0.1:1"},
		Temporal:    client.Options{HostPort: "127.0.0.1:1"}, // never reached
		Credentials: paidvendor.NewStaticCredentials("test-key"),
	})
	if err == nil || !strings.Contains(err.Error(), "cannot be written") || !strings.Contains(err.Error(), "writable by the worker's user") ||
		strings.Contains(err.Error(), "connect to Temporal") {
		t.Fatalf("RunWorker on a read-only ledger = %v, want a refusal naming the fix before connecting", err)
	}
}

// Only the worker creates a ledger, and it says so in its log (with where),
// once: not when the ledger exists.
func TestWorkerSaysWhenItCreatesTheLedger(t *testing.T) {
	dir := t.TempDir()
	url := "sqlite:" + filepath.Join(dir, "new", "allot.db")
	for i, want := range []int{1, 0} {
		var logs bytes.Buffer
		ctx, cancel := patience.Context(t, 30*time.Second)
		err := app.RunWorker(ctx, app.WorkerConfig{
			Config:      app.Config{Ledger: url, DataDir: dir, VendorURL: "http://127.0.0.1:1"},
			Temporal:    client.Options{HostPort: "127.0.0.1:1"}, // the ledger comes first
			Credentials: paidvendor.NewStaticCredentials("test-key"),
			Logger:      slog.New(slog.NewJSONHandler(&logs, nil)),
		})
		cancel()
		if err == nil || !strings.Contains(err.Error(), "connect to Temporal") {
			t.Fatalf("start %d: RunWorker = %v, want it to open the ledger and then fail to reach Temporal", i+1, err)
		}
		created := 0
		for line := range strings.Lines(logs.String()) {
			var rec struct {
				Level, Msg, Ledger string
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			if rec.Msg == "created a new ledger" {
				created++
				if rec.Level != "INFO" || rec.Ledger != url {
					t.Errorf("start %d logged %s", i+1, line)
				}
			}
		}
		if created != want {
			t.Fatalf("start %d logged %d \"created a new ledger\" records, want %d:\n%s", i+1, created, want, logs.String())
		}
	}
}

// A metrics port out of range is refused as such before the worker opens
// anything: the ledger is not created and Temporal is not dialled.
func TestWorkerRefusesAMetricsPortOutOfRange(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "allot.db")
	ctx, cancel := patience.Context(t, 30*time.Second)
	defer cancel()
	err := app.RunWorker(ctx, app.WorkerConfig{
		Config:      app.Config{Ledger: "sqlite:" + path, DataDir: dir, VendorURL: "http://127.0.0.1:1"},
		Temporal:    client.Options{HostPort: "127.0.0.1:1"}, // never reached
		Credentials: paidvendor.NewStaticCredentials("test-key"),
		MetricsAddr: "127.0.0.1:99999",
	})
	if err == nil || !strings.Contains(err.Error(), `--metrics-addr "127.0.0.1:99999": port 99999 is out of range: give a port from 1 to 65535`) {
		t.Fatalf("RunWorker with metrics port 99999 = %v, want the port named as out of range", err)
	}
	if _, statErr := os.Stat(path); !os.IsNotExist(statErr) {
		t.Fatalf("the refused worker created its ledger (%v)", statErr)
	}
}
