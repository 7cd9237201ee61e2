package pipeline

import (
	"strings"
	"testing"
	"time"
)

func TestScheduleSpecDefaultsAndOverrides(t *testing.T) {
	set, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := set.Get("weekly-video")
	spec, err := p.Schedule.Spec()
	if err != nil {
		t.Fatal(err)
	}
	if spec.Cron != "0 2 * * MON" || spec.Overlap != DefaultOverlap || spec.CatchupWindow != 24*time.Hour || spec.MaxBackfill != 90*24*time.Hour {
		t.Fatalf("embedded schedule %+v", spec)
	}
	// A flag's interval replaces the configured cron, and the other way round.
	spec, err = p.Schedule.Merge(Schedule{Interval: "10s", Jitter: "2s", Overlap: "Buffer-All"}).Spec()
	if err != nil {
		t.Fatal(err)
	}
	if spec.Cron != "" || spec.Interval != 10*time.Second || spec.Jitter != 2*time.Second || spec.Overlap != "buffer_all" {
		t.Fatalf("merged %+v", spec)
	}
}

func TestScheduleSpecRejectsBadSettings(t *testing.T) {
	for _, c := range []struct {
		s    Schedule
		want string
	}{
		{Schedule{}, "no timing"},
		{Schedule{Cron: "0 2 * * MON", Interval: "1h"}, "keep one"},
		{Schedule{Cron: "every monday"}, "not a cron expression"},
		{Schedule{Cron: "0 25 * * *"}, "not a cron expression"},
		{Schedule{Interval: "weekly"}, "not a positive duration"},
		{Schedule{Interval: "-1h"}, "not a positive duration"},
		{Schedule{Interval: "500ms"}, "under a second"},
		{Schedule{Interval: "1h", Jitter: "-1s"}, "jitter \"-1s\" must not be negative"},
		{Schedule{Interval: "1h", CatchupWindow: "5s"}, "minimum"},
		{Schedule{Interval: "1h", Overlap: "sometimes"}, "overlap policy"},
		{Schedule{Interval: "1h", MaxBackfill: "forever"}, "max_backfill"},
	} {
		if _, err := c.s.Spec(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want it to mention %q", c.s, err, c.want)
		}
	}
	// A bad schedule in the file fails the whole file.
	_, err := Parse([]byte("[[pipeline]]\nname = \"x\"\n  [pipeline.schedule]\n  cron = \"sometimes\"\n  [[pipeline.step]]\n  name = \"plan\"\n  kind = \"local\"\n"), "test")
	if err == nil || !strings.Contains(err.Error(), "schedule") {
		t.Fatalf("bad schedule in a file: %v", err)
	}
}

func TestApprovalStepTakesNoAction(t *testing.T) {
	_, err := Parse([]byte("[[pipeline]]\nname = \"x\"\n  [[pipeline.step]]\n  name = \"approve\"\n  kind = \"approval\"\n  action = \"plan\"\n"), "test")
	if err == nil || !strings.Contains(err.Error(), "approval step") {
		t.Fatalf("approval step with an action: %v", err)
	}
}
