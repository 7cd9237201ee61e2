package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"allot/app"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/internal/pipelinetest"
)

// A run's forecast looks its key up as the run will start it. An operator's
// key is given unplaced (--key manual-7) and the ledger keeps it placed
// (weekly/manual-7): the forecast of a re-run of an existing key once
// missed it and counted a new episode's reservation (issue 26 §1). A key
// in the Schedule's form carries its nominal time, which the forecast
// takes, as the run does, instead of the clock.
func TestRunForecastLooksUpTheKeyTheRunUses(t *testing.T) {
	dir := t.TempDir()
	pipelines := pipelinetest.Write(t, dir, budgetPipelinesFile)
	url := "sqlite:" + filepath.Join(dir, "allot.db")
	ctx := context.Background()
	led, err := ledger.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	nominal := time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC)
	if _, err := led.Allocate(ctx, ledger.AllocateInput{Pipeline: "weekly", Key: "weekly/manual-7", Period: "2026-W32", NominalTime: nominal}); err != nil {
		t.Fatal(err)
	}
	led.Close()
	c := &cli{cfg: app.Config{Ledger: url, Pipelines: pipelines}}
	set, err := c.cfg.LoadPipelines()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"manual-7", "weekly/manual-7"} {
		fs, err := c.runForecast(ctx, set, operator.RunInput{Pipeline: "weekly", Key: key, NominalTime: nominal})
		if err != nil || len(fs) != 0 {
			t.Errorf("--key %s: forecast %v, %v; want nothing: the key has its episode", key, fs, err)
		}
	}
	fs, err := c.runForecast(ctx, set, operator.RunInput{Pipeline: "weekly", Key: "manual-8", NominalTime: nominal})
	if err != nil || len(fs) != 1 || fs[0].Period != "2026-W32" {
		t.Fatalf("a new key: forecast %+v, %v; want video-weekly 2026-W32", fs, err)
	}
	// The Schedule's key for a time of week 33, without --nominal-time:
	// the forecast is for week 33, not for the week of the clock.
	fs, err = c.runForecast(ctx, set, operator.RunInput{Pipeline: "weekly", Key: "weekly/scheduled-2026-08-10T02:00:00Z"})
	if err != nil || len(fs) != 1 || fs[0].Period != "2026-W33" {
		t.Fatalf("the Schedule's key for 2026-08-10: forecast %+v, %v; want video-weekly 2026-W33", fs, err)
	}
}
