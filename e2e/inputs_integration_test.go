package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"allot"
	"allot/internal/allottest"
	"allot/internal/ledger"
	"allot/internal/operator"
)

const draftsTOML = `
[[pipeline]]
name   = "drafts"
period = "day"
max_episodes_per_period = 5
  [pipeline.inputs]
  claim = "oldest_ready"
  [[pipeline.step]]
  name    = "render"
  kind    = "exec"
  command = ["sh", "-c", "printf '%s %s' \"$ALLOT_INPUT\" \"$ALLOT_EPISODE\" > rendered.txt"]
  outputs = ["rendered.txt"]
  [[pipeline.step]]
  name    = "publish"
  kind    = "exec"
  command = ["sh", "-c", "cat > input.json"]
  outputs = ["input.json"]
`

// Issue 10: runs racing for one day's drafts each claim a different one,
// in the allocation's transaction; the runs that find none ready are
// skipped with no_ready_input; the claimed input reaches every step (as
// ALLOT_INPUT and in the JSON input).
func TestRacingRunsClaimEachInputOnce(t *testing.T) {
	c := allottest.NewClusterWithPipelines(t, []byte(draftsTOML))
	ctx := c.Ctx()
	nominal := time.Date(2026, 8, 3, 9, 0, 0, 0, time.UTC)
	for i := range 3 {
		if _, err := c.Ledger.AddInput(ctx, ledger.Input{Pipeline: "drafts", Ref: fmt.Sprintf("draft-%d", i), ReadyAt: nominal.Add(-time.Duration(3-i) * time.Hour),
			Payload: json.RawMessage(fmt.Sprintf(`{"title":"Draft %d"}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	const runs = 5
	results := make([]operator.RunResult, runs)
	errs := make([]error, runs)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			results[i], errs[i] = c.Runs.Run(ctx, operator.RunInput{Pipeline: "drafts", Key: fmt.Sprintf("slot-%d", i), NominalTime: nominal, Wait: true})
		})
	}
	wg.Wait()
	claimed := map[string]string{}
	skipped := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		switch res := r.Result; res.Outcome {
		case allot.OutcomeAllocated:
			if prev, ok := claimed[res.Input]; ok || res.Input == "" {
				t.Fatalf("input %q claimed by %s and %s", res.Input, prev, res.EpisodeID)
			}
			claimed[res.Input] = res.EpisodeID
		case allot.OutcomeSkipped:
			if res.Reason != allot.ReasonNoReadyInput {
				t.Fatalf("run %d skipped with %s, want %s", i, res.Reason, allot.ReasonNoReadyInput)
			}
			skipped++
		default:
			t.Fatalf("run %d: %+v", i, res)
		}
	}
	if len(claimed) != 3 || skipped != 2 {
		t.Fatalf("%d inputs claimed, %d runs skipped; want 3 and 2", len(claimed), skipped)
	}
	for ref, ep := range claimed {
		if st := c.WaitEpisode("drafts", ep); st.Stage != allot.StageCompleted {
			t.Fatalf("episode %s ended %s", ep, st.Stage)
		}
		dir := filepath.Join(c.Dir, "artifacts", "drafts", ep)
		rendered, err := os.ReadFile(filepath.Join(dir, "rendered.txt"))
		if err != nil || string(rendered) != ref+" "+ep {
			t.Fatalf("episode %s rendered %q, %v; want its input %s", ep, rendered, err, ref)
		}
		var in struct {
			Claimed struct {
				Ref     string          `json:"ref"`
				Payload json.RawMessage `json:"payload"`
			} `json:"claimed"`
		}
		data, err := os.ReadFile(filepath.Join(dir, "input.json"))
		if err != nil || json.Unmarshal(data, &in) != nil || in.Claimed.Ref != ref || len(in.Claimed.Payload) == 0 {
			t.Fatalf("episode %s's publish step got %s, %v", ep, data, err)
		}
	}
	outcomes, err := c.Ledger.RunOutcomes(ctx, "drafts", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]int{}
	for _, o := range outcomes {
		reasons[o.Reason]++
	}
	if reasons[allot.ReasonNoReadyInput] != 2 || reasons[allot.ReasonNewEpisode] != 3 {
		t.Fatalf("recorded run reasons %v, want 3 new_episode and 2 no_ready_input", reasons)
	}
	c.MustCheck()
}
