package e2e

import (
	"regexp"
	"strings"
	"testing"

	"allot"
	"allot/internal/allottest"
	"allot/workflows"
)

// Schedule commands record who acted in the note Temporal keeps ("by
// NAME: why"), and describe and list show it. A trigger on a paused
// schedule starts a run (Temporal's pause holds the schedule's own times,
// not a trigger): the starter names that run, says the schedule stays
// paused, and prints the unpause command, which runs.
func TestScheduleNotesNameWhoActedAndTriggerSaysWhatRan(t *testing.T) {
	c := allottest.NewCluster(t)
	dir := t.TempDir()
	starter := allottest.Starter{Bin: allottest.BuildBinary(t, "allot/starter"), Dir: dir, Env: []string{
		"TEMPORAL_ADDRESS=" + c.Server.GetFrontendHostPort(), "TEMPORAL_NAMESPACE=" + c.Namespace,
		"ALLOT_LEDGER=" + c.LedgerURL, "ALLOT_PIPELINES=" + allottest.WritePipelines(t, dir), "USER=maria", "HOME=" + t.TempDir(),
	}}
	out := string(starter.Out(t, "schedule", "create", "--pipeline", "weekly-video", "--interval", "168h", "--paused", "--by", "alice", "--note", "launch freeze"))
	if !regexp.MustCompile(`(?m)^note\s+by alice: launch freeze$`).MatchString(out) {
		t.Fatalf("schedule create printed\n%s", out)
	}
	out = string(starter.Out(t, "schedule", "pause", "--pipeline", "weekly-video", "--note", "still frozen"))
	if !regexp.MustCompile(`(?m)^note\s+by maria: still frozen$`).MatchString(out) {
		t.Fatalf("schedule pause without --by (USER=maria) printed\n%s", out)
	}
	out = string(starter.Out(t, "schedule", "list"))
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(allot.ScheduleID("weekly-video")) + `\s+weekly-video\s+true\s+\S+\s+by maria: still frozen$`).MatchString(out) {
		t.Fatalf("schedule list printed\n%s", out)
	}

	out = string(starter.Out(t, "schedule", "trigger", "--pipeline", "weekly-video"))
	m := regexp.MustCompile(`(?m)^triggered: run (\S+) started$`).FindStringSubmatch(out)
	unpause := allot.ScheduleUnpauseCommand("weekly-video")
	if m == nil || !strings.Contains(out, "stays paused") || !strings.Contains(out, "`"+unpause+"`") {
		t.Fatalf("schedule trigger on a paused schedule printed\n%s", out)
	}
	var res workflows.ScheduledRunResult
	if err := c.Client.GetWorkflow(c.Ctx(), m[1], "").Get(c.Ctx(), &res); err != nil || res.EpisodeID == "" {
		t.Fatalf("the triggered run %s: %+v, %v", m[1], res, err)
	}

	args, err := workflows.SplitCommand(unpause)
	if err != nil {
		t.Fatal(err)
	}
	out = string(starter.Out(t, append(args[1:], "--by", "bob")...))
	if !regexp.MustCompile(`(?m)^paused\s+false$`).MatchString(out) || !regexp.MustCompile(`(?m)^note\s+by bob$`).MatchString(out) {
		t.Fatalf("%s --by bob printed\n%s", unpause, out)
	}
}
