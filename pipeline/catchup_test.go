package pipeline

import (
	"strings"
	"testing"
	"time"

	"allot"
)

func TestParseCatchUp(t *testing.T) {
	good := map[string]CatchUp{
		"":         {Mode: allot.CatchUpAll},
		"all":      {Mode: allot.CatchUpAll},
		"skip":     {Mode: allot.CatchUpSkip},
		" Latest ": {Mode: allot.CatchUpLatest},
		"up_to:3":  {Mode: allot.CatchUpUpTo, N: 3},
	}
	for in, want := range good {
		got, err := ParseCatchUp(in)
		if err != nil || got != want {
			t.Errorf("ParseCatchUp(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"none", "up_to", "up_to:0", "up_to:-1", "up_to:x", "up_to:10001", "latest:2"} {
		if _, err := ParseCatchUp(in); err == nil || !strings.Contains(err.Error(), "up_to:N") {
			t.Errorf("ParseCatchUp(%q) = %v, want an error naming the policies", in, err)
		}
	}
}

func TestCatchUpSettingsAreValidated(t *testing.T) {
	for _, s := range []Schedule{
		{Interval: "1h", CatchUp: "sometimes"},
		{Interval: "1h", CatchUpGrace: "500ms"},
		{Interval: "1h", CatchUpGrace: "soon"},
	} {
		if _, err := s.Spec(); err == nil {
			t.Errorf("Spec(%+v) accepted it", s)
		}
	}
	spec, err := Schedule{Interval: "1h"}.Spec()
	if err != nil || spec.CatchUp.Mode != allot.CatchUpAll || spec.CatchUpGrace != DefaultCatchUpGrace {
		t.Fatalf("defaults: %+v, %v", spec, err)
	}
	merged := Schedule{Interval: "1h", CatchUp: "skip"}.Merge(Schedule{CatchUp: "latest", CatchUpGrace: "2m"})
	if merged.CatchUp != "latest" || merged.CatchUpGrace != "2m" {
		t.Fatalf("merge: %+v", merged)
	}
}

// Five hourly times missed in an outage that ends at 04:30 (grace 5m):
// each policy runs exactly the ones it promises.
func TestDecideCatchUpRunsWhatEachPolicyPromises(t *testing.T) {
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	missed := []time.Time{base, base.Add(time.Hour), base.Add(2 * time.Hour), base.Add(3 * time.Hour)}
	end := base.Add(4*time.Hour + 30*time.Minute) // 04:00's run too begins 30m late: missed
	cases := map[string][]bool{
		"skip":    {false, false, false, false, false},
		"latest":  {false, false, false, false, true},
		"all":     {true, true, true, true, true},
		"up_to:2": {false, false, false, true, true},
	}
	times := append(missed, base.Add(4*time.Hour))
	for policy, want := range cases {
		for _, spec := range []Schedule{{Interval: "1h", CatchUp: policy}, {Cron: "0 * * * *", CatchUp: policy}} {
			s, err := spec.Spec()
			if err != nil {
				t.Fatal(err)
			}
			for i, nominal := range times {
				d, err := s.DecideCatchUp("Europe/Berlin", nominal, end)
				if err != nil {
					t.Fatal(err)
				}
				if d.Run != want[i] || !d.Missed {
					t.Errorf("%s %+v: time %s began %s: %+v, want run=%v missed", policy, spec, nominal, end, d, want[i])
				}
			}
			// On time (within the grace): always runs, asks nothing.
			if d, err := s.DecideCatchUp("UTC", base, base.Add(s.CatchUpGrace)); err != nil || d.Missed || !d.Run {
				t.Errorf("%s: on time: %+v, %v", policy, d, err)
			}
		}
	}
}

func TestDecideCatchUpCountsJitterAsOnTime(t *testing.T) {
	s, err := Schedule{Interval: "1h", Jitter: "10m", CatchUp: "skip", CatchUpGrace: "1m"}.Spec()
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	if d, _ := s.DecideCatchUp("UTC", base, base.Add(11*time.Minute)); d.Missed {
		t.Fatalf("10m of jitter and 1m of grace: a start 11m late is on time, got %+v", d)
	}
	if d, _ := s.DecideCatchUp("UTC", base, base.Add(11*time.Minute+time.Second)); !d.Missed || d.Run {
		t.Fatalf("a start past jitter and grace is missed and skipped, got %+v", d)
	}
}

func TestSpecTimes(t *testing.T) {
	s, err := Schedule{Cron: "0 2 * * MON"}.Spec()
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	got, err := s.Times("Europe/Berlin", from, from.AddDate(0, 0, 35), 0)
	if err != nil {
		t.Fatal(err)
	}
	// Mondays at 02:00 Berlin: CEST (UTC+2) until 25 October, CET after.
	want := []string{"2026-10-05T00:00:00Z", "2026-10-12T00:00:00Z", "2026-10-19T00:00:00Z", "2026-10-26T01:00:00Z", "2026-11-02T01:00:00Z"}
	if len(got) != len(want) {
		t.Fatalf("times %v, want %v", got, want)
	}
	for i := range want {
		if got[i].Format(time.RFC3339) != want[i] {
			t.Fatalf("times %v, want %v", got, want)
		}
	}
	if got, _ := s.Times("Europe/Berlin", from, from.AddDate(0, 0, 35), 2); len(got) != 2 {
		t.Fatalf("limit 2 gave %d", len(got))
	}
	iv, _ := Schedule{Interval: "90m"}.Spec()
	at := time.Unix(0, 0).Add(3 * 90 * time.Minute).UTC()
	got, _ = iv.Times("", at, at.Add(3*time.Hour), 0)
	if len(got) != 2 || !got[0].Equal(at.Add(90*time.Minute)) || !got[1].Equal(at.Add(3*time.Hour)) {
		t.Fatalf("interval times after an aligned time: %v (the bound after is exclusive, until inclusive)", got)
	}
	if _, err := (ScheduleSpec{}).Times("", at, at, 0); err == nil {
		t.Fatal("a spec without timing gave times")
	}
}
