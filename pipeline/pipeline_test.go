package pipeline

import (
	"strings"
	"testing"
	"time"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPeriodOfISOWeekYearBoundaries(t *testing.T) {
	p := &Pipeline{Name: "w", Period: ISOWeek}
	cases := map[string]string{
		"2026-12-31T12:00:00Z": "2026-W53",
		"2027-01-01T00:00:00Z": "2026-W53",
		"2027-01-03T23:59:59Z": "2026-W53",
		"2027-01-04T00:00:00Z": "2027-W01",
		"2025-12-29T00:00:00Z": "2026-W01", // ISO year starts before the calendar year
		"2026-08-03T02:00:00Z": "2026-W32",
	}
	for in, want := range cases {
		if got := p.PeriodOf(mustTime(t, in)); got != want {
			t.Errorf("PeriodOf(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestPeriodOfUsesPipelineZone(t *testing.T) {
	set, err := Parse([]byte(`
[[pipeline]]
name = "tokyo-daily"
period = "day"
time_zone = "Asia/Tokyo"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
[[pipeline]]
name = "tokyo-weekly"
time_zone = "Asia/Tokyo"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
`), "test")
	if err != nil {
		t.Fatal(err)
	}
	daily, _ := set.Get("tokyo-daily")
	weekly, _ := set.Get("tokyo-weekly")
	// 20:00 UTC on Sunday 2027-01-03 is already Monday 2027-01-04 in Tokyo.
	ts := mustTime(t, "2027-01-03T20:00:00Z")
	if got := daily.PeriodOf(ts); got != "2027-01-04" {
		t.Errorf("day period in Tokyo = %s, want 2027-01-04", got)
	}
	if got := weekly.PeriodOf(ts); got != "2027-W01" {
		t.Errorf("week period in Tokyo = %s, want 2027-W01", got)
	}
	utc := &Pipeline{Name: "u", Period: Day}
	if got := utc.PeriodOf(ts); got != "2027-01-03" {
		t.Errorf("day period in UTC = %s, want 2027-01-03", got)
	}
}

func TestPeriodOfAcrossDST(t *testing.T) {
	set, err := Parse([]byte(`
[[pipeline]]
name = "berlin"
period = "day"
time_zone = "Europe/Berlin"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
`), "test")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := set.Get("berlin")
	cases := map[string]string{
		// Spring forward on 2026-03-29: 01:00 UTC is 03:00 CEST the same day.
		"2026-03-28T22:59:59Z": "2026-03-28",
		"2026-03-28T23:00:00Z": "2026-03-29",
		"2026-03-29T21:59:59Z": "2026-03-29", // 23:59:59 CEST
		"2026-03-29T22:00:00Z": "2026-03-30",
		// Fall back on 2026-10-25: the day has 25 hours.
		"2026-10-24T21:59:59Z": "2026-10-24",
		"2026-10-24T22:00:00Z": "2026-10-25",
		"2026-10-25T22:59:59Z": "2026-10-25", // 23:59:59 CET
		"2026-10-25T23:00:00Z": "2026-10-26",
	}
	for in, want := range cases {
		if got := p.PeriodOf(mustTime(t, in)); got != want {
			t.Errorf("PeriodOf(%s) in Berlin = %s, want %s", in, got, want)
		}
	}
}

func TestDefaultConfigHasDemo(t *testing.T) {
	set, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	p, err := set.Get("weekly-video")
	if err != nil {
		t.Fatal(err)
	}
	if p.Period != ISOWeek || p.Location() != time.UTC || len(p.Steps) == 0 {
		t.Fatalf("weekly-video = %+v", p)
	}
}

func TestParseRejectsBadInput(t *testing.T) {
	step := "\n  [[pipeline.step]]\n  name = \"plan\"\n  kind = \"local\"\n"
	cases := map[string]struct{ src, want string }{
		"bad name":     {`[[pipeline]]` + "\nname = \"Weekly_Video\"" + step, "invalid"},
		"long name":    {`[[pipeline]]` + "\nname = \"" + strings.Repeat("a", 64) + "\"" + step, "invalid"},
		"bad period":   {`[[pipeline]]` + "\nname = \"x\"\nperiod = \"month\"" + step, "period \"month\" is unknown"},
		"bad zone":     {`[[pipeline]]` + "\nname = \"x\"\ntime_zone = \"Mars/Olympus\"" + step, "not an IANA zone"},
		"negative cap": {`[[pipeline]]` + "\nname = \"x\"\nmax_episodes_per_period = -1" + step, "max_episodes_per_period"},
		"no steps":     {`[[pipeline]]` + "\nname = \"x\"", "no steps"},
		"unknown key":  {`[[pipeline]]` + "\nname = \"x\"\nperiodd = \"day\"" + step, "did you mean period?"},
		"duplicate":    {`[[pipeline]]` + "\nname = \"x\"" + step + `[[pipeline]]` + "\nname = \"x\"" + step, "defined twice"},
		"bad action":   {`[[pipeline]]` + "\nname = \"x\"\n  [[pipeline.step]]\n  name = \"render\"\n  kind = \"local\"", "unknown local action"},
		"bad kind":     {`[[pipeline]]` + "\nname = \"x\"\n  [[pipeline.step]]\n  name = \"plan\"\n  kind = \"remote\"", "kind \"remote\""},
		"empty":        {``, "defines no pipelines"},
		"not toml":     {`{"pipeline": []}`, "pipeline file"},
	}
	for name, c := range cases {
		_, err := Parse([]byte(c.src), "test")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error = %v, want it to mention %q", name, err, c.want)
		}
	}
}

func TestGetUnknownAndInvalid(t *testing.T) {
	set, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	var unknown *UnknownError
	if _, err := set.Get("monthly-podcast"); err == nil || !asUnknown(err, &unknown) {
		t.Fatalf("Get(unknown) = %v, want *UnknownError", err)
	}
	if !strings.Contains(unknown.Error(), "weekly-video") {
		t.Errorf("unknown-pipeline error should list known pipelines: %v", unknown)
	}
	if _, err := set.Get("Bad Name"); err == nil || !strings.Contains(err.Error(), "invalid") {
		t.Fatalf("Get(bad name) = %v", err)
	}
}

func asUnknown(err error, target **UnknownError) bool {
	u, ok := err.(*UnknownError)
	*target = u
	return ok
}
