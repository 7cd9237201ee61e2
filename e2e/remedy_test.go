package e2e

import (
	"bytes"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/allottest"
	"allot/internal/cleanenv"
	"allot/paidvendor/paidvendortest"
	"allot/workflows"
)

// starterEnv runs the real starter binary against the cluster, as an
// operator at a shell would: the Temporal connection, the ledger, the
// pipelines and the vendor from the environment.
type starterEnv struct {
	t   *testing.T
	bin string
	env []string
}

func newStarterEnv(t *testing.T, c *allottest.Cluster) *starterEnv {
	t.Helper()
	return &starterEnv{t: t, bin: allottest.BuildBinary(t, "allot/starter"), env: cleanenv.Environ(
		"TEMPORAL_ADDRESS="+c.Server.GetFrontendHostPort(),
		"TEMPORAL_NAMESPACE="+c.Namespace,
		"ALLOT_LEDGER="+c.LedgerURL,
		"ALLOT_PIPELINES="+allottest.WritePipelines(t, t.TempDir()),
		"ALLOT_VENDOR_URL="+c.Vendor.URL,
		"ALLOT_VENDOR_API_KEY="+allottest.VendorKey,
	)}
}

// run runs one remedy exactly as printed (a `starter ...` command line).
func (s *starterEnv) run(remedy string) string {
	s.t.Helper()
	args := allottest.SplitCommand(s.t, remedy)
	if len(args) == 0 || args[0] != "starter" {
		s.t.Fatalf("remedy %q is not a starter command", remedy)
	}
	cmd := exec.Command(s.bin, args[1:]...)
	cmd.Env = s.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		s.t.Fatalf("remedy %q failed: %v\n%s", remedy, err, out.String())
	}
	return out.String()
}

func remedyFor(t *testing.T, st workflows.EpisodeState, prefix string) string {
	t.Helper()
	for _, r := range st.Attention.Remedies {
		if strings.HasPrefix(r, prefix) {
			return r
		}
	}
	t.Fatalf("no remedy starting %q among %q", prefix, st.Attention.Remedies)
	return ""
}

// Every remedy the Episode prints is a complete command, and running it as
// printed moves the episode on (issue 7): for an unknown outcome the
// look-up (which prints the exact adopt command, run next), resubmit, retry
// and abandon; for a result that did not verify, rework and abandon.
func TestEveryRemedyRunsAsPrinted(t *testing.T) {
	c := allottest.NewCluster(t)
	s := newStarterEnv(t, c)
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{LoseResponseAfterAccept: 1, NoLookup: true}); err != nil {
		t.Fatal(err)
	}
	var unknown []string
	for i := range 4 {
		unknown = append(unknown, c.Allocate("auto-paid", monday().Add(time.Duration(i)*time.Hour)))
	}
	parked := map[string]workflows.EpisodeState{}
	for _, ep := range unknown {
		st := c.WaitStage("auto-paid", ep, allot.StageNeedsAttention)
		if st.Attention.ErrorType != allot.OutcomeUnknown || len(st.Attention.Remedies) != 4 {
			t.Fatalf("episode %s parked with %+v", ep, st.Attention)
		}
		parked[ep] = st
	}
	// The vendor answers look-ups again; nothing is lost in between.
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{}); err != nil {
		t.Fatal(err)
	}

	// 1. The look-up, then the adopt command it prints.
	out := s.run(remedyFor(t, parked[unknown[0]], "starter episode lookup"))
	var adopt string
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "next"); ok && strings.Contains(rest, "--adopt") {
			adopt = strings.TrimSpace(rest)
		}
	}
	if adopt == "" {
		t.Fatalf("lookup printed no adopt command:\n%s", out)
	}
	s.run(adopt)
	// 2-4. Resubmit, retry and abandon, each on its own episode.
	s.run(remedyFor(t, parked[unknown[1]], "starter episode resolve --pipeline auto-paid --episode "+unknown[1]+" --step video --resubmit"))
	s.run(remedyFor(t, parked[unknown[2]], "starter episode resolve --pipeline auto-paid --episode "+unknown[2]+" --step video --retry"))
	s.run(remedyFor(t, parked[unknown[3]], "starter episode resolve --pipeline auto-paid --episode "+unknown[3]+" --step video --abandon"))
	for i, ep := range unknown {
		final := c.WaitEpisode("auto-paid", ep)
		if final.Stage != allot.StageCompleted {
			t.Fatalf("episode %d (%s) after its remedy: %+v", i, ep, final)
		}
	}
	if got := c.Episodes("auto-paid"); len(got) != 4 {
		t.Fatalf("remedies allocated episodes: %d", len(got))
	}
	c.Vendor.AssertAtMostOneChargePerKey(t)

	// A result that does not verify: rework (one more charge) and abandon.
	c.Vendor.CorruptResults(true)
	var mismatch []string
	for i := range 2 {
		mismatch = append(mismatch, c.Allocate("auto-paid", monday().Add(time.Duration(10+i)*time.Hour)))
	}
	for _, ep := range mismatch {
		st := c.WaitStage("auto-paid", ep, allot.StageNeedsAttention)
		if st.Attention.ErrorType != allot.ResultHashMismatch {
			t.Fatalf("episode %s parked with %+v", ep, st.Attention)
		}
		parked[ep] = st
	}
	c.Vendor.CorruptResults(false)
	s.run(remedyFor(t, parked[mismatch[0]], "starter episode rework"))
	s.run(remedyFor(t, parked[mismatch[1]], "starter episode resolve --pipeline auto-paid --episode "+mismatch[1]+" --step video --abandon"))
	for _, ep := range mismatch {
		if final := c.WaitEpisode("auto-paid", ep); final.Stage != allot.StageCompleted {
			t.Fatalf("episode %s after its remedy: %+v", ep, final)
		}
	}
	c.Vendor.AssertAtMostOneChargePerKey(t)
	c.MustCheck()
}

// Defect (issue 7): approve on a completed episode answered NotReady but
// started a new run each time. Refused commands on a settled episode are
// answered from the ledger and start nothing.
func TestRefusedCommandsOnASettledEpisodeStartNoRun(t *testing.T) {
	c := allottest.NewCluster(t)
	ep := c.Allocate("auto-paid", monday())
	if final := c.WaitEpisode("auto-paid", ep); final.Stage != allot.StageCompleted {
		t.Fatalf("episode %+v", final)
	}
	id := allot.EpisodeWorkflowID("auto-paid", ep)
	before := c.CountRuns(id)
	for _, cmd := range []struct {
		update string
		req    workflows.DecisionRequest
	}{
		{workflows.ApproveUpdate, workflows.DecisionRequest{}},
		{workflows.RejectUpdate, workflows.DecisionRequest{Reason: "late"}},
		{workflows.ResolveUpdate, workflows.DecisionRequest{Step: "video", Resolve: allot.ActionRetry}},
	} {
		for range 2 {
			if _, err := c.Send("auto-paid", ep, cmd.update, cmd.req); allottest.ErrorType(err) != allot.NotReady {
				t.Fatalf("%s on a completed episode: %v, want %s", cmd.update, err, allot.NotReady)
			}
		}
	}
	if after := c.CountRuns(id); after != before {
		t.Fatalf("refused commands started runs: %d -> %d", before, after)
	}
	// The refusal names the commands that reopen the episode, complete:
	// the reassemble it prints runs as printed and the episode completes
	// again.
	_, err := c.Send("auto-paid", ep, workflows.ApproveUpdate, workflows.DecisionRequest{})
	printed := regexp.MustCompile("`(starter episode [^`]*)`").FindAllStringSubmatch(fmt.Sprint(err), -1)
	want := []string{"starter episode reassemble --pipeline auto-paid --episode " + ep, "starter episode rework --pipeline auto-paid --episode " + ep + " --step video"}
	var got []string
	for _, m := range printed {
		got = append(got, m[1])
	}
	if len(got) < 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("the refusal prints %q, want the reopen commands %q first", got, want)
	}
	bin := allottest.BuildBinary(t, "allot/starter")
	if code, out := starterCmd(t, bin, c, allottest.WritePipelines(t, t.TempDir()), allottest.SplitCommand(t, got[0])[1:]...); code != 0 {
		t.Fatalf("%s: exit %d\n%s", got[0], code, out)
	}
	if final := c.WaitEpisode("auto-paid", ep); final.Stage != allot.StageCompleted {
		t.Fatalf("after the printed reassemble: %+v", final)
	}
}
