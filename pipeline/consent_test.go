package pipeline

import (
	"strings"
	"testing"
	"time"
)

// Flags that set both a cron and an interval used to lose the cron
// silently (Merge let the interval win); now Spec refuses the pair.
func TestMergeOfConflictingOverridesIsRefused(t *testing.T) {
	configured := Schedule{Cron: "0 2 * * MON"}
	_, err := configured.Merge(Schedule{Cron: "0 3 * * *", Interval: "1h"}).Spec()
	if err == nil || !strings.Contains(err.Error(), "keep one") {
		t.Fatalf("cron and interval together: %v, want a refusal", err)
	}
	// One of them alone still replaces the configured other.
	spec, err := configured.Merge(Schedule{Interval: "1h"}).Spec()
	if err != nil || spec.Cron != "" || spec.Interval != time.Hour {
		t.Fatalf("interval over a cron: %+v, %v", spec, err)
	}
}

func TestMaxBackfillRuns(t *testing.T) {
	spec, err := Schedule{Interval: "1h"}.Spec()
	if err != nil || spec.MaxBackfillRuns != DefaultMaxBackfillRuns || DefaultMaxBackfillRuns != 100 {
		t.Fatalf("default: %+v, %v", spec, err)
	}
	spec, err = Schedule{Interval: "1h", MaxBackfillRuns: 5}.Merge(Schedule{MaxBackfillRuns: 7}).Spec()
	if err != nil || spec.MaxBackfillRuns != 7 {
		t.Fatalf("override: %+v, %v", spec, err)
	}
	if _, err := (Schedule{Interval: "1h", MaxBackfillRuns: -1}).Spec(); err == nil || !strings.Contains(err.Error(), "max_backfill_runs") {
		t.Fatalf("negative: %v", err)
	}
	set, err := Parse([]byte("[[pipeline]]\nname = \"x\"\n  [pipeline.schedule]\n  interval = \"10s\"\n  max_backfill_runs = 20\n  [[pipeline.step]]\n  name = \"plan\"\n  kind = \"local\"\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := set.Get("x")
	if n, err := p.Schedule.MaxBackfillRunCount(); err != nil || n != 20 {
		t.Fatalf("from the file: %d, %v", n, err)
	}
}

func TestStallAfter(t *testing.T) {
	set, err := Parse([]byte("[[pipeline]]\nname = \"slow\"\nstall_after = \"2h\"\n  [[pipeline.step]]\n  name = \"plan\"\n  kind = \"local\"\n"+
		"[[pipeline]]\nname = \"plain\"\n  [[pipeline.step]]\n  name = \"plan\"\n  kind = \"local\"\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]time.Duration{"slow": 2 * time.Hour, "plain": DefaultStallAfter, "only-in-the-ledger": DefaultStallAfter} {
		if got := set.StallAfter(name); got != want {
			t.Errorf("StallAfter(%s) = %s, want %s", name, got, want)
		}
	}
	if DefaultStallAfter != 15*time.Minute {
		t.Fatalf("default stall_after %s, want 15m", DefaultStallAfter)
	}
	for _, bad := range []string{"soon", "0s", "-1m"} {
		_, err := Parse([]byte("[[pipeline]]\nname = \"x\"\nstall_after = \""+bad+"\"\n  [[pipeline.step]]\n  name = \"plan\"\n  kind = \"local\"\n"), "test")
		if err == nil || !strings.Contains(err.Error(), "stall_after") {
			t.Errorf("stall_after %q: %v", bad, err)
		}
	}
	// The embedded file documents the setting.
	if !strings.Contains(string(DefaultConfig), "stall_after") || !strings.Contains(string(DefaultConfig), "max_backfill_runs") {
		t.Fatal("pipeline/pipelines.toml does not document stall_after and max_backfill_runs")
	}
}
