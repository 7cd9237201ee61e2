package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"

	"allot"
	"allot/internal/livespec"
	"allot/pipeline"
	"allot/workflows"
)

const commandPipelines = `
[[pipeline]]
name = "weekly"
  [pipeline.schedule]
  cron         = "0 2 * * MON"
  max_backfill = "168h"
  [[pipeline.step]]
  name = "video"
  kind = "paid"
  [[pipeline.step]]
  name = "assemble"
  kind = "local"
  [[pipeline.step]]
  name = "approve"
  kind = "approval"

[[pipeline]]
name = "unscheduled"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
`

func testPipelines(t *testing.T) *pipeline.Set {
	t.Helper()
	set, err := pipeline.Parse([]byte(commandPipelines), "operator test")
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// idleClient is a Temporal client that fails the test on any call: the
// refusals below must happen before anything is sent.
func idleClient(t *testing.T) client.Client { return mocks.NewClient(t) }

func errorType(err error) string { return allot.ErrorType(err) }

func TestEpisodeStartOptionsResumeFinishedEpisodes(t *testing.T) {
	o := EpisodeStartOptions("weekly", "2026-W32-0", "allot")
	if o.ID != "weekly/episode/2026-W32-0" || o.TaskQueue != "allot" || o.StaticSummary != "weekly episode 2026-W32-0" {
		t.Errorf("options %+v", o)
	}
	// A running episode takes the command; a finished one starts again
	// and resumes from the ledger.
	if o.WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING ||
		o.WorkflowIDReusePolicy != enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE {
		t.Errorf("policies: conflict %v, reuse %v", o.WorkflowIDConflictPolicy, o.WorkflowIDReusePolicy)
	}
	p, _ := o.TypedSearchAttributes.GetKeyword(workflows.PipelineAttr)
	e, _ := o.TypedSearchAttributes.GetKeyword(workflows.EpisodeAttr)
	if p != "weekly" || e != "2026-W32-0" || o.TypedSearchAttributes.Size() != 2 {
		t.Errorf("search attributes %v", o.TypedSearchAttributes)
	}
}

func TestCheckStepRefusesWhatIsNotAPaidStep(t *testing.T) {
	p, err := testPipelines(t).Get("weekly")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		update, step string
		refused      bool
	}{
		{workflows.ReworkUpdate, "video", false},
		{workflows.ResolveUpdate, "video", false},
		{workflows.ReworkUpdate, "assemble", true}, // a local step costs nothing to redo
		{workflows.ResolveUpdate, "approve", true},
		{workflows.ReworkUpdate, "voice", true},
		{workflows.ResolveUpdate, "", true},
		{workflows.ApproveUpdate, "", false}, // commands without a step are not checked
		{workflows.ReassembleUpdate, "anything", false},
	} {
		err := checkStep(p, CommandInput{Pipeline: "weekly", EpisodeID: "2026-W32-0", Update: tc.update, Request: workflows.DecisionRequest{Step: tc.step}})
		switch {
		case tc.refused && errorType(err) != allot.StepNotFound:
			t.Errorf("%s of step %q: %v, want %s", tc.update, tc.step, err, allot.StepNotFound)
		case tc.refused && !strings.Contains(err.Error(), "[video]"):
			t.Errorf("%s of step %q: %v, want the paid steps listed", tc.update, tc.step, err)
		case !tc.refused && err != nil:
			t.Errorf("%s of step %q refused: %v", tc.update, tc.step, err)
		}
	}
}

func TestSendRefusesBeforeContactingTemporal(t *testing.T) {
	l := newTestLedger(t)
	l.Allocate("weekly", mon)
	cmds := &EpisodeCommands{Client: idleClient(t), Pipelines: testPipelines(t), TaskQueue: "allot", Ledger: l.led}
	ctx := context.Background()
	for name, tc := range map[string]struct {
		in       CommandInput
		wantType string
		wantText string
	}{
		"unknown pipeline": {CommandInput{Pipeline: "monthly", EpisodeID: "2026-W32-0", Update: workflows.ApproveUpdate}, allot.PipelineNotFound, "monthly"},
		"no episode":       {CommandInput{Pipeline: "weekly", Update: workflows.ApproveUpdate}, allot.InvalidInput, "--episode is required"},
		"local step":       {CommandInput{Pipeline: "weekly", EpisodeID: "2026-W32-0", Update: workflows.ReworkUpdate, Request: workflows.DecisionRequest{Step: "assemble"}}, allot.StepNotFound, "no paid step"},
		"missing episode":  {CommandInput{Pipeline: "weekly", EpisodeID: "2026-W32-5", Update: workflows.ApproveUpdate}, allot.EpisodeNotFound, "has no episode 2026-W32-5"},
		// Issue 38 §4: a reject ends the episode; the ledger keeps why.
		"reject without a reason": {CommandInput{Pipeline: "weekly", EpisodeID: "2026-W32-0", Update: workflows.RejectUpdate, Request: workflows.DecisionRequest{Reason: "  "}}, allot.InvalidInput,
			"--reason is required: rejecting episode 2026-W32-0 ends it, and the ledger keeps why: `starter episode reject --pipeline weekly --episode 2026-W32-0 --reason 'why it is rejected'`"},
	} {
		_, err := cmds.Send(ctx, tc.in)
		if err == nil || errorType(err) != tc.wantType || !strings.Contains(err.Error(), tc.wantText) {
			t.Errorf("%s: %v (type %q), want type %q mentioning %q", name, err, errorType(err), tc.wantType, tc.wantText)
		}
	}
}

func TestRunRefusesBadInputBeforeContactingTemporal(t *testing.T) {
	runs := &Runs{Client: idleClient(t), Pipelines: testPipelines(t), TaskQueue: "allot"}
	for name, in := range map[string]RunInput{
		"unknown pipeline":  {Pipeline: "monthly"},
		"invalid pipeline":  {Pipeline: "Weekly Video"},
		"key over 200":      {Pipeline: "weekly", Key: strings.Repeat("k", 201)},
		"control character": {Pipeline: "weekly", Key: "weekly\x00run"},
	} {
		if _, err := runs.Run(context.Background(), in); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestScheduleCreateRefusesBadSettingsBeforeContactingTemporal(t *testing.T) {
	s := &Schedules{Client: idleClient(t), Pipelines: testPipelines(t), TaskQueue: "allot"}
	for name, tc := range map[string]struct {
		in   ScheduleInput
		want string
	}{
		"unknown pipeline": {ScheduleInput{Pipeline: "monthly"}, "monthly"},
		"no timing":        {ScheduleInput{Pipeline: "unscheduled"}, "no timing"},
		"bad cron":         {ScheduleInput{Pipeline: "weekly", Override: pipeline.Schedule{Cron: "every monday"}}, "not a cron expression"},
		"bad overlap":      {ScheduleInput{Pipeline: "weekly", Override: pipeline.Schedule{Overlap: "sometimes"}}, "overlap policy"},
		"short catch-up":   {ScheduleInput{Pipeline: "weekly", Override: pipeline.Schedule{CatchupWindow: "1s"}}, "catchup_window"},
	} {
		if _, err := s.Create(context.Background(), tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error mentioning %q", name, err, tc.want)
		}
		if _, err := s.Update(context.Background(), tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("update, %s: %v, want an error mentioning %q", name, err, tc.want)
		}
	}
}

func TestBackfillRefusesBadRangesBeforeContactingTemporal(t *testing.T) {
	s := &Schedules{Client: idleClient(t), Pipelines: testPipelines(t), TaskQueue: "allot"}
	from := time.Date(2026, 7, 27, 0, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		in   BackfillInput
		want string
	}{
		"no from":          {BackfillInput{Pipeline: "weekly", To: from}, "needs --from and --to"},
		"no to":            {BackfillInput{Pipeline: "weekly", From: from}, "needs --from and --to"},
		"reversed":         {BackfillInput{Pipeline: "weekly", From: from, To: from.Add(-time.Hour)}, "reversed or empty"},
		"empty":            {BackfillInput{Pipeline: "weekly", From: from, To: from}, "reversed or empty"},
		"over max":         {BackfillInput{Pipeline: "weekly", From: from, To: from.Add(169 * time.Hour)}, "longer than pipeline weekly's max_backfill of 168h0m0s"},
		"over default max": {BackfillInput{Pipeline: "unscheduled", From: from, To: from.Add(91 * 24 * time.Hour)}, "max_backfill of 2160h0m0s"},
		"over override":    {BackfillInput{Pipeline: "weekly", From: from, To: from.Add(2 * time.Hour), Override: pipeline.Schedule{MaxBackfill: "1h"}}, "max_backfill of 1h0m0s"},
		"bad override":     {BackfillInput{Pipeline: "weekly", From: from, To: from.Add(time.Hour), Override: pipeline.Schedule{MaxBackfill: "forever"}}, "max_backfill"},
		"unknown pipeline": {BackfillInput{Pipeline: "monthly", From: from, To: from.Add(time.Hour)}, "monthly"},
		"invalid pipeline": {BackfillInput{Pipeline: "Weekly", From: from, To: from.Add(time.Hour)}, "Weekly"},
	} {
		if _, err := s.Backfill(context.Background(), tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error mentioning %q", name, err, tc.want)
		}
	}
}

// A followed backfill through the Schedule reads its runs' progress from
// the ledger: without one it is refused before Temporal is contacted, with
// the command that sends it unfollowed; a dry run or --no-wait goes on
// without a ledger (and here reaches the idle client, which fails).
func TestFollowedBackfillWithoutALedgerIsRefusedBeforeContactingTemporal(t *testing.T) {
	s := &Schedules{Client: idleClient(t), Pipelines: testPipelines(t), TaskQueue: "allot"}
	from := time.Date(2026, 7, 27, 0, 0, 0, 0, time.UTC)
	_, err := s.Backfill(context.Background(), BackfillInput{Pipeline: "weekly", From: from, To: from.Add(time.Hour), Yes: true, Flags: []string{"--via-schedule"}})
	want := "`starter schedule backfill --pipeline weekly --from 2026-07-27T00:00:00Z --to 2026-07-27T01:00:00Z --yes --via-schedule --no-wait`"
	if errorType(err) != allot.NotReady || !strings.Contains(err.Error(), want) {
		t.Fatalf("followed, without a ledger: %v (type %q), want NotReady naming %s", err, errorType(err), want)
	}
}

// The server keeps a cron string as a calendar spec, and describe writes it
// back as cron. What describe shows must mean the schedule that was given:
// each case is a cron expression, the calendar the server stores for it,
// and the cron livespec.CalendarCron writes; the written one must be accepted as a
// schedule setting again and fire at the same times as the original.
func TestCalendarCronRoundTrips(t *testing.T) {
	r := func(start, end, step int) client.ScheduleRange {
		return client.ScheduleRange{Start: start, End: end, Step: step}
	}
	one := func(v int) []client.ScheduleRange { return []client.ScheduleRange{{Start: v}} }
	for _, tc := range []struct {
		given string
		cal   client.ScheduleCalendarSpec
		want  string
	}{
		{"0 2 * * MON", client.ScheduleCalendarSpec{Minute: one(0), Hour: one(2), DayOfWeek: one(1)}, "0 2 * * 1"},
		// The same, with the server's explicit full ranges for "*".
		{"0 2 * * MON", client.ScheduleCalendarSpec{Minute: one(0), Hour: one(2),
			DayOfMonth: []client.ScheduleRange{r(1, 31, 1)}, Month: []client.ScheduleRange{r(1, 12, 1)}, DayOfWeek: one(1)}, "0 2 * * 1"},
		{"*/15 * * * *", client.ScheduleCalendarSpec{Minute: []client.ScheduleRange{r(0, 59, 15)}}, "0-59/15 * * * *"},
		{"0 9-17 * * 1-5", client.ScheduleCalendarSpec{Minute: one(0), Hour: []client.ScheduleRange{r(9, 17, 1)}, DayOfWeek: []client.ScheduleRange{r(1, 5, 1)}}, "0 9-17 * * 1-5"},
		{"0,30 6 1 1,7 *", client.ScheduleCalendarSpec{Minute: []client.ScheduleRange{{Start: 0}, {Start: 30}}, Hour: one(6), DayOfMonth: one(1),
			Month: []client.ScheduleRange{{Start: 1}, {Start: 7}}}, "0,30 6 1 1,7 *"},
		{"30 4 1-7/2 * 0", client.ScheduleCalendarSpec{Minute: one(30), Hour: one(4), DayOfMonth: []client.ScheduleRange{r(1, 7, 2)}, DayOfWeek: one(0)}, "30 4 1-7/2 * 0"},
	} {
		got := livespec.CalendarCron(tc.cal)
		if got != tc.want {
			t.Errorf("calendarCron(%s as stored) = %q, want %q", tc.given, got, tc.want)
			continue
		}
		if _, err := (pipeline.Schedule{Cron: got}).Spec(); err != nil {
			t.Errorf("%q cannot be given back as a schedule: %v", got, err)
			continue
		}
		a, _ := cron.ParseStandard(tc.given)
		b, _ := cron.ParseStandard(got)
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for i := 0; i < 50; i++ {
			na, nb := a.Next(at), b.Next(at)
			if !na.Equal(nb) {
				t.Errorf("%q fires at %s where %q fires at %s", got, nb, tc.given, na)
				break
			}
			at = na
		}
	}
}

// Defect (issue 25): reassemble of an episode whose assembly never ran was
// accepted (a run started, a decision recorded). With no workflow running,
// the ledger answers it, NotReady, and nothing is sent to Temporal but the
// describe.
func TestReassembleBeforeTheAssemblyIsRefusedFromTheLedger(t *testing.T) {
	l := newTestLedger(t)
	ep := l.Allocate("weekly", mon)
	cl := mocks.NewClient(t)
	cl.On("DescribeWorkflowExecution", mock.Anything, allot.EpisodeWorkflowID("weekly", ep.ID), "").
		Return(nil, serviceerror.NewNotFound("no such workflow"))
	cmds := &EpisodeCommands{Client: cl, Pipelines: testPipelines(t), TaskQueue: "allot", Ledger: l.led}
	_, err := cmds.Send(context.Background(), CommandInput{Pipeline: "weekly", EpisodeID: ep.ID, Update: workflows.ReassembleUpdate})
	if errorType(err) != allot.NotReady {
		t.Fatalf("reassemble before the assembly: %v, want %s", err, allot.NotReady)
	}
	for _, want := range []string{"step assemble has not run yet", "`" + allot.ResumeCommand("weekly", ep.ID) + "`"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	if ds, err := l.led.Decisions(context.Background(), "weekly", ep.ID); err != nil || len(ds) != 0 {
		t.Fatalf("decisions %+v, %v", ds, err)
	}
}
