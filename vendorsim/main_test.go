package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"allot"
	"allot/paidvendor"
	"allot/paidvendor/vendorapi"
)

func noEnv(string) string { return "" }

func TestBadFlagsExit2NamingTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--lose-response-after-accept", "1.5"}, "--lose-response-after-accept"},
		{[]string{"--lose-response-after-accept", "NaN"}, "--lose-response-after-accept"},
		{[]string{"--fail-before-accept", "-0.1"}, "--fail-before-accept"},
		{[]string{"--latency", "-1s"}, "--latency"},
		{[]string{"--task-duration", "-5ms"}, "--task-duration"},
		{[]string{"--latency", "soon"}, "-latency"},
		{[]string{"--seed", "x"}, "-seed"},
		{[]string{"--addr", "8787"}, "--addr"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"extra"}, "unexpected argument"},
		{[]string{"--api-key", "has space"}, "API key"},
		{[]string{"--bill-drop-charge", "1.1"}, "--bill-drop-charge"},
		{[]string{"--bill-wrong-amount", "-0.5"}, "--bill-wrong-amount"},
		{[]string{"--bill-double-charge", "NaN"}, "--bill-double-charge"},
		{[]string{"--bill-refund", "2"}, "--bill-refund"},
		{[]string{"--bill-refund", "0.6", "--bill-double-charge", "0.6"}, "add up to"},
		{[]string{"--bill-phantom-every", "-1"}, "--bill-phantom-every"},
		{[]string{"--bill-phantom-every", "often"}, "-bill-phantom-every"},
		{[]string{"--batch-expire-halfway", "1.5"}, "--batch-expire-halfway"},
		{[]string{"--batch-lose-create-response", "-1"}, "--batch-lose-create-response"},
		{[]string{"--batch-duration", "-1s"}, "--batch-duration"},
		{[]string{"--batch-retention", "0s"}, "--batch-retention must be above 0"},
	} {
		var stderr bytes.Buffer
		if code := run(tc.args, noEnv, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: stderr %q does not name %q", tc.args, stderr.String(), tc.want)
		}
		if strings.Contains(stderr.String(), "has space") {
			t.Errorf("%v: the error echoes the API key", tc.args)
		}
	}
}

func TestAPIKeySources(t *testing.T) {
	env := func(k string) string {
		if k == APIKeyEnv {
			return "env-key-123"
		}
		return ""
	}
	for _, tc := range []struct {
		args   []string
		getenv func(string) string
		want   string
	}{
		{nil, noEnv, DevAPIKey},
		{nil, env, "env-key-123"},
		{[]string{"--api-key", "flag-key-456"}, env, "flag-key-456"},
	} {
		opts, err := parseFlags(tc.args, tc.getenv, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		if opts.sim.APIKey != tc.want {
			t.Errorf("%v: key from %s, want %q", tc.args, opts.keySource, tc.want)
		}
	}
	var help bytes.Buffer
	if code := run([]string{"--help"}, env, &help); code != 0 {
		t.Errorf("--help exit %d", code)
	}
	if strings.Contains(help.String(), "env-key-123") {
		t.Error("--help prints the key from the environment")
	}
}

func TestServeRoundTripAndShutdown(t *testing.T) {
	opts, err := parseFlags([]string{"--addr", "127.0.0.1:0", "--task-duration", "0s", "--state", filepath.Join(t.TempDir(), "s.json")},
		func(k string) string {
			if k == APIKeyEnv {
				return "sk-vendorsim-test-LEAKCHECK"
			}
			return ""
		}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuf
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, opts, slog.New(slog.NewTextHandler(&logs, nil)), ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	c, err := paidvendor.NewHTTPClient("http://"+addr, "sk-vendorsim-test-LEAKCHECK", nil)
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.Submit(context.Background(), paidvendor.SubmitRequest{IdempotencyKey: allot.IdempotencyKey("p", "e", "s", 0), Kind: "render"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Task(context.Background(), task.ID); err != nil || got.Status != paidvendor.StatusSucceeded {
		t.Fatalf("Task: %+v, %v", got, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve after shutdown: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop")
	}
	if strings.Contains(logs.String(), "LEAKCHECK") {
		t.Fatalf("log shows the API key:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "vendorsim: stopped") {
		t.Fatalf("no clean stop logged:\n%s", logs.String())
	}
}

// TestBillFaultFlags: the flags plant bill faults in the served vendor,
// its bill shows them, GET /v1/bill-faults lists them, and the state file
// keeps them for the next start.
func TestBillFaultFlags(t *testing.T) {
	state := filepath.Join(t.TempDir(), "s.json")
	start := func(args ...string) (*paidvendor.HTTPClient, func()) {
		t.Helper()
		opts, err := parseFlags(append([]string{"--addr", "127.0.0.1:0", "--task-duration", "0s", "--state", state}, args...), noEnv, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ready, done := make(chan string, 1), make(chan error, 1)
		go func() { done <- serve(ctx, opts, slog.New(slog.DiscardHandler), ready) }()
		var addr string
		select {
		case addr = <-ready:
		case err := <-done:
			t.Fatalf("serve: %v", err)
		}
		c, err := paidvendor.NewHTTPClient("http://"+addr, DevAPIKey, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c, func() {
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("serve: %v", err)
			}
		}
	}
	ctx := context.Background()
	c, stop := start("--bill-double-charge", "1", "--bill-phantom-every", "2")
	var tasks []paidvendor.Task
	for i := range 2 {
		task, err := c.Submit(ctx, paidvendor.SubmitRequest{IdempotencyKey: allot.IdempotencyKey("p", fmt.Sprint(i), "s", 0), Kind: "render"})
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task)
	}
	faults, err := c.BillFaults(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, f := range faults {
		kinds = append(kinds, f.Kind)
	}
	if want := []string{vendorapi.BillFaultDouble, vendorapi.BillFaultDouble, vendorapi.BillFaultPhantom}; !slices.Equal(kinds, want) || faults[0].TaskID != tasks[0].ID || faults[1].TaskID != tasks[1].ID {
		t.Fatalf("bill faults after 2 tasks: %+v, want a double charge of each and one phantom", faults)
	}
	bill, err := c.Charges(ctx)
	if err != nil || len(bill) != 5 || bill[1].ID != faults[0].LineID || bill[4].ID != faults[2].LineID {
		t.Fatalf("bill: %+v, %v; want 2 tasks charged twice and a phantom, as listed", bill, err)
	}
	stop()

	c, stop = start()
	defer stop()
	again, err := c.BillFaults(ctx)
	if err != nil || !slices.Equal(again, faults) {
		t.Fatalf("bill faults after a restart: %+v, %v; want %+v", again, err, faults)
	}
	if _, err := c.Submit(ctx, paidvendor.SubmitRequest{IdempotencyKey: allot.IdempotencyKey("p", "2", "s", 0), Kind: "render"}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.BillFaults(ctx); err != nil || len(got) != len(faults) {
		t.Fatalf("with no --bill-* flags a task planted faults: %+v, %v", got, err)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestBatchFlagsReachTheSimulator(t *testing.T) {
	opts, err := parseFlags([]string{"--batch-duration", "90s", "--batch-retention", "1h", "--batch-lose-create-response", "0.1",
		"--batch-expire-halfway", "0.2", "--batch-cancel-halfway", "0.3", "--batch-output-gone", "0.4"}, noEnv, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	got := opts.sim
	if got.BatchDuration != 90*time.Second || got.BatchRetention != time.Hour || got.BatchLoseCreateResponse != 0.1 ||
		got.BatchExpireHalfway != 0.2 || got.BatchCancelHalfway != 0.3 || got.BatchOutputGone != 0.4 {
		t.Errorf("the batch flags gave %v", got)
	}
	if opts, err = parseFlags(nil, noEnv, &bytes.Buffer{}); err != nil || opts.sim.BatchDuration != time.Minute || opts.sim.BatchRetention != 29*24*time.Hour {
		t.Errorf("default batch settings: %v, %v; want a minute's work and 29 days of retention", opts.sim, err)
	}
}
