package main

import (
	"allot"
	"bytes"
	"strings"
	"testing"
	"text/tabwriter"

	"allot/ledger"
	"allot/operator"
)

// episode show prints an effect step's task under EFFECT STEP, without a
// cost, and a paid step's under PAID STEP (issue 15: both were PAID STEP).
func TestShowPrintsEffectStepsAsEffects(t *testing.T) {
	res := operator.ShowResult{
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
