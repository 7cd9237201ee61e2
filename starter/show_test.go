package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/internal/report"
)

// episode show prints an effect step's task under EFFECT STEP, without a
// cost, and a paid step's under PAID STEP (issue 15: both were PAID STEP).
func TestShowPrintsEffectStepsAsEffects(t *testing.T) {
	res := report.ShowResult{
		StepKinds: map[string]allot.StepKind{"video": allot.KindPaid, "notify": allot.KindEffect},
		PaidTasks: []ledger.PaidTask{
			{PaidTaskRef: ledger.PaidTaskRef{Step: "video"}, State: "succeeded", RemoteRef: "vt_1"},
			{PaidTaskRef: ledger.PaidTaskRef{Step: "notify"}, State: "succeeded", RemoteRef: "msg_1"},
		},
	}
	var out bytes.Buffer
	tw := tabwriter.NewWriter(&out, 0, 4, 2, ' ', 0)
	printShow(tw, res)
	tw.Flush()
	text := out.String()
	paid, effects, ok := strings.Cut(text, "EFFECT STEP")
	if !ok || !strings.Contains(paid, "PAID STEP") || !strings.Contains(paid, "vt_1") || strings.Contains(paid, "notify") ||
		!strings.Contains(effects, "notify") || strings.Contains(effects, "video") {
		t.Fatalf("show printed\n%s", text)
	}
}

// episode show names who made each decision, and a dash for a decision
// recorded without one (before ledger v16, or an automatic approval).
func TestShowPrintsWhoDecided(t *testing.T) {
	at := time.Date(2026, 8, 4, 12, 0, 0, 0, time.UTC)
	res := report.ShowResult{Decisions: []ledger.OperatorDecision{
		{Action: allot.ActionApprove, Step: "approval", Reason: "looks right", By: "alice", At: at},
		{Action: allot.ActionReject, Step: "approval", Reason: "auto", At: at},
	}}
	var out bytes.Buffer
	tw := tabwriter.NewWriter(&out, 0, 4, 2, ' ', 0)
	printShow(tw, res)
	tw.Flush()
	text := out.String()
	if !regexp.MustCompile(`(?m)^DECISION\s+STEP\s+REV\s+REF\s+BY\s+REASON\s+AT$`).MatchString(text) ||
		!regexp.MustCompile(`(?m)^approve\s+approval\s+0\s+-\s+alice\s+looks right\s`).MatchString(text) ||
		!regexp.MustCompile(`(?m)^reject\s+approval\s+0\s+-\s+-\s+auto\s`).MatchString(text) {
		t.Fatalf("show printed\n%s", text)
	}
}

// schedule trigger names the run it started and, on a paused schedule,
// says the schedule stays paused with the command that unpauses it. (The
// embedded server's behaviour: TestScheduleNotesNameWhoActedAndTriggerSaysWhatRan.)
func TestTriggerSaysWhatRanAndThatAPauseHolds(t *testing.T) {
	for _, paused := range []bool{true, false} {
		var out bytes.Buffer
		c := &cli{stdout: &out}
		c.printTriggered(operator.ScheduleResult{Pipeline: "weekly-video", Paused: paused, Triggered: "weekly-video/scheduled-2026-12-03T16:13:58Z"})
		text := out.String()
		if !strings.Contains(text, "triggered: run weekly-video/scheduled-2026-12-03T16:13:58Z started") ||
			strings.Contains(text, "stays paused") != paused || strings.Contains(text, "`"+allot.ScheduleUnpauseCommand("weekly-video")+"`") != paused {
			t.Errorf("paused %v: printed\n%s", paused, text)
		}
	}
}
