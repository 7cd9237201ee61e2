package chaos

import (
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

// The checker of the planted late period passes exactly the records the
// plant must give: the warning when declared before it, the late record
// with the no_run cause and its command; it refuses a missing or second
// kind, another cause, and a judged period due before the declaration.
func TestLateMustBeExactlyThePlantedPeriod(t *testing.T) {
	due := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	nominal := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	rec := func(period string, kind allot.DeadlineKind) ledger.DeadlineRecord {
		return ledger.DeadlineRecord{Pipeline: PipelineDeadline, Period: period, Kind: kind, DueAt: due,
			Cause: allot.CauseNoRun, Command: allot.RunCommand(PipelineDeadline, nominal)}
	}
	early, late := due.Add(-time.Minute), due.Add(-time.Second)
	for _, c := range []struct {
		name     string
		recs     []ledger.DeadlineRecord
		declared time.Time
		want     string // "" passes
	}{
		{"warning and late", []ledger.DeadlineRecord{rec("2026-12-03", allot.DeadlineWarning), rec("2026-12-03", allot.DeadlineLate)}, early, ""},
		{"late only, declared after the warning time", []ledger.DeadlineRecord{rec("2026-12-03", allot.DeadlineLate)}, late, ""},
		{"no warning", []ledger.DeadlineRecord{rec("2026-12-03", allot.DeadlineLate)}, early, "want exactly [warning late]"},
		{"nothing", nil, late, "want exactly [late]"},
		{"on time", []ledger.DeadlineRecord{rec("2026-12-03", allot.DeadlineOnTime)}, late, "want exactly [late]"},
		{"an earlier period judged", []ledger.DeadlineRecord{rec("2026-12-02", allot.DeadlineLate), rec("2026-12-03", allot.DeadlineLate)}, late, "period 2026-12-02 was judged"},
		{"another cause", []ledger.DeadlineRecord{func() ledger.DeadlineRecord {
			r := rec("2026-12-03", allot.DeadlineLate)
			r.Cause = allot.CauseSchedulePaused
			return r
		}()}, late, `cause "schedule_paused"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := strings.Join(compareLate(c.recs, "2026-12-03", nominal, due, c.declared), "; ")
			if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
				t.Fatalf("compareLate = %q; want %q", got, c.want)
			}
		})
	}
}

// The deadline offset written in the pipelines file falls at the planted
// time on the day it is due.
func TestDeadlineOffsetIsTheDueTime(t *testing.T) {
	for _, due := range []time.Time{time.Date(2026, 12, 3, 10, 4, 5, 0, time.UTC), time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)} {
		set := pipelineSet(t, due)
		p, err := set.Get(PipelineDeadline)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := p.Due(p.PeriodOf(due))
		if err != nil || got.Sub(due) > time.Second || got.Before(due) {
			t.Fatalf("due %s: the file's deadline is %s, %v", due, got, err)
		}
	}
}

func pipelineSet(t *testing.T, deadlineDue time.Time) *pipeline.Set {
	t.Helper()
	set, err := pipeline.Parse([]byte(pipelinesTOML(Scales["small"], "http://127.0.0.1:1", "http://127.0.0.1:2", deadlineDue)), "chaos")
	if err != nil {
		t.Fatal(err)
	}
	return set
}
