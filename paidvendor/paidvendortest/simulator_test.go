package paidvendortest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"allot"
	"allot/paidvendor"
)

type outcome string

func classifyOutcome(t *testing.T, err error) outcome {
	t.Helper()
	var he *paidvendor.HTTPError
	var te *paidvendor.TransportError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &he) && he.StatusCode == 503:
		return "failed-before-accept"
	case errors.As(err, &te):
		return "response-lost"
	}
	t.Fatalf("unexpected error: %v", err)
	return ""
}

func runFaultSequence(t *testing.T, seed int64) ([]outcome, int) {
	t.Helper()
	tv := newTestVendor(t, SimConfig{Seed: seed, FailBeforeAccept: 0.3, LoseResponseAfterAccept: 0.3})
	var seq []outcome
	for i := range 40 {
		_, err := tv.client.Submit(context.Background(), submitReq(allot.IdempotencyKey("p", fmt.Sprintf("2026-W32-%d", i), "render", 0)))
		seq = append(seq, classifyOutcome(t, err))
	}
	return seq, tv.sim.ChargeCount()
}

func TestSeededFaultsRepeat(t *testing.T) {
	a, chargesA := runFaultSequence(t, 42)
	b, chargesB := runFaultSequence(t, 42)
	if !reflect.DeepEqual(a, b) || chargesA != chargesB {
		t.Fatalf("same seed, different faults:\n%v (%d charges)\n%v (%d charges)", a, chargesA, b, chargesB)
	}
	seen := map[outcome]int{}
	for _, o := range a {
		seen[o]++
	}
	if seen["ok"] == 0 || seen["failed-before-accept"] == 0 || seen["response-lost"] == 0 {
		t.Fatalf("40 submissions at P=0.3 should meet every outcome, got %v", seen)
	}
	if want := seen["ok"] + seen["response-lost"]; chargesA != want {
		t.Fatalf("charges = %d, want one per accepted submission (%d)", chargesA, want)
	}
	c, _ := runFaultSequence(t, 43)
	if reflect.DeepEqual(a, c) {
		t.Fatalf("seeds 42 and 43 gave the same 40 faults: the seed is not used")
	}
}

func TestUnauthorizedRequestsDoNotMoveTheFaultSequence(t *testing.T) {
	cfg := SimConfig{Seed: 7, FailBeforeAccept: 0.5}
	plain := newTestVendor(t, cfg)
	noisy := newTestVendor(t, cfg)
	intruder := noisy.newClient(t, "sk-intruder")
	for i := range 12 {
		req := submitReq(allot.IdempotencyKey("p", fmt.Sprint(i), "s", 0))
		_, errPlain := plain.client.Submit(context.Background(), req)
		_, _ = intruder.Submit(context.Background(), req)
		_, errNoisy := noisy.client.Submit(context.Background(), req)
		if (errPlain == nil) != (errNoisy == nil) {
			t.Fatalf("submission %d: %v vs %v", i, errPlain, errNoisy)
		}
	}
}

func TestStateFileSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "vendor-state.json")
	cfg := SimConfig{StateFile: state}
	ctx := context.Background()

	first := newTestVendor(t, cfg)
	keyA := allot.IdempotencyKey("weekly-video", "2026-W32-0", "render", 0)
	keyB := allot.IdempotencyKey("weekly-video", "2026-W32-1", "render", 0)
	a, err := first.client.Submit(ctx, submitReq(keyA))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.client.Submit(ctx, submitReq(keyB)); err != nil {
		t.Fatal(err)
	}
	before := first.sim.Charges()

	second := newTestVendor(t, cfg) // a new process, as far as the vendor knows
	if got := second.sim.Charges(); !reflect.DeepEqual(got, before) {
		t.Fatalf("charges after restart:\n%+v\nwant\n%+v", got, before)
	}
	again, err := second.client.Submit(ctx, submitReq(keyA))
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != a.ID || second.sim.ChargeCount() != 2 {
		t.Fatalf("resubmit after restart: task %s (want %s), charges %d (want 2)", again.ID, a.ID, second.sim.ChargeCount())
	}
	found, err := second.client.LookupByIdempotencyKey(ctx, keyB)
	if err != nil || found.ID != before[1].TaskID {
		t.Fatalf("lookup after restart: %+v, %v", found, err)
	}
	got, err := second.client.Task(ctx, a.ID)
	if err != nil || got.SHA256 != ResultSHA256(a.ID, "render", submitReq(keyA).Params) {
		t.Fatalf("task after restart: %+v, %v", got, err)
	}

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "vendor-state.json" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("state dir holds %v, want only the state file (no temp files left)", names)
	}
	data, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), testKey) {
		t.Fatal("the state file holds the API key")
	}
}

func TestCorruptStateFileIsAnError(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(state, []byte(`{"version":1,"tasks":[`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSimulator(SimConfig{APIKey: testKey, StateFile: state}); err == nil || !strings.Contains(err.Error(), state) {
		t.Fatalf("OpenSimulator with a truncated state file: %v, want an error naming the file", err)
	}
	if err := os.WriteFile(state, []byte(`{"version":1,"tasks":[],"charges":[{"task_id":"vt_0123456789abcdef"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSimulator(SimConfig{APIKey: testKey, StateFile: state}); err == nil {
		t.Fatal("OpenSimulator accepted a charge for an unknown task")
	}
}

func TestStateSaveFailureChargesNothing(t *testing.T) {
	state := filepath.Join(t.TempDir(), "no-such-dir", "state.json")
	tv := newTestVendor(t, SimConfig{StateFile: state})
	_, err := tv.client.Submit(context.Background(), submitReq(allot.IdempotencyKey("p", "e", "s", 0)))
	var he *paidvendor.HTTPError
	if !errors.As(err, &he) || he.StatusCode != 500 {
		t.Fatalf("err = %v, want HTTP 500", err)
	}
	if tv.sim.ChargeCount() != 0 || tv.sim.TaskCount() != 0 {
		t.Fatalf("a submission that could not be saved left %d charges, %d tasks", tv.sim.ChargeCount(), tv.sim.TaskCount())
	}
}

func TestSimulatorConfigValidation(t *testing.T) {
	for name, cfg := range map[string]SimConfig{
		"no key":            {},
		"lose > 1":          {APIKey: "k", LoseResponseAfterAccept: 1.5},
		"fail < 0":          {APIKey: "k", FailBeforeAccept: -0.1},
		"negative latency":  {APIKey: "k", Latency: -1},
		"negative duration": {APIKey: "k", TaskDuration: -1},
		"bad price":         {APIKey: "k", PricePerKind: map[string]paidvendor.Cost{"x": {Amount: -1, Currency: "USD"}}},
	} {
		if _, err := OpenSimulator(cfg); err == nil {
			t.Errorf("%s: OpenSimulator accepted %+v", name, cfg)
		}
	}
	s := NewSimulator(SimConfig{APIKey: "k"})
	if err := s.SetFaults(SimFaults{FailBeforeAccept: 2}); err == nil {
		t.Error("SetFaults accepted P=2")
	}
	f := SimFaults{FailBeforeAccept: 0.25, NoLookup: true}
	if err := s.SetFaults(f); err != nil || s.Faults() != f {
		t.Errorf("SetFaults/Faults: %v, %+v", err, s.Faults())
	}
}

func TestSetFaultsAtRuntime(t *testing.T) {
	tv := newTestVendor(t, SimConfig{})
	ctx := context.Background()
	key := allot.IdempotencyKey("p", "e", "s", 0)
	if err := tv.sim.SetFaults(SimFaults{FailBeforeAccept: 1}); err != nil {
		t.Fatal(err)
	}
	var he *paidvendor.HTTPError
	if _, err := tv.client.Submit(ctx, submitReq(key)); !errors.As(err, &he) || !he.Temporary() {
		t.Fatalf("with FailBeforeAccept=1: %v, want a temporary HTTP error", err)
	}
	if err := tv.sim.SetFaults(SimFaults{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tv.client.Submit(ctx, submitReq(key)); err != nil {
		t.Fatalf("after clearing faults: %v", err)
	}
	if tv.sim.ChargeCount() != 1 {
		t.Fatalf("charges = %d, want 1", tv.sim.ChargeCount())
	}
}
