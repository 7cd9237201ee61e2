package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/allottest"
	"allot/internal/cleanenv"
)

// execFailTOML has an exec step that fails for good (exit 3, leaving a
// child behind that holds its stderr) until the file its param names
// exists, then a local step after it. FIXED is replaced by that file's path.
const execFailTOML = `
[[pipeline]]
name   = "settle-exec"
period = "day"
  [[pipeline.step]]
  name    = "settle"
  kind    = "exec"
  command = ["sh", "-c", 'if [ -f "$ALLOT_PARAM_FIXED" ]; then echo 42 > total.txt; else sleep 300 & echo "the source table is missing" >&2; exit 3; fi']
  outputs = ["total.txt"]
  params  = { fixed = "FIXED" }
  [[pipeline.step]]
  name = "publish"
  kind = "local"
`

// Issue 15: an exec step whose command fails for good parks its episode
// (a child it left holding its stderr used to keep the step running until
// its timeout), and `starter episode show` gives the reason (exit code,
// stderr) and the commands that move it on; each runs as printed: --retry
// once the cause is fixed runs the step again, --abandon goes on without it.
func TestFailedExecStepShowsRunnableRemedies(t *testing.T) {
	fixed := filepath.Join(t.TempDir(), "fixed")
	toml := strings.ReplaceAll(execFailTOML, "FIXED", fixed)
	c := allottest.NewClusterWithPipelines(t, []byte(toml))
	bin := allottest.BuildBinary(t, "allot/starter")
	pipelinesFile := writeFile(t, toml)
	s := &starterEnv{t: t, bin: bin, env: cleanenv.Environ(
		"TEMPORAL_ADDRESS="+c.Server.GetFrontendHostPort(), "TEMPORAL_NAMESPACE="+c.Namespace,
		"ALLOT_LEDGER="+c.LedgerURL, "ALLOT_PIPELINES="+pipelinesFile)}

	day := time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC)
	retried, abandoned := c.Allocate("settle-exec", day), c.Allocate("settle-exec", day.Add(24*time.Hour))
	remedies := map[string][]string{}
	for _, ep := range []string{retried, abandoned} {
		st := c.WaitStage("settle-exec", ep, allot.StageNeedsAttention)
		if st.Attention == nil || st.Attention.ErrorType != allot.StepFailure || st.Attention.Step != "settle" {
			t.Fatalf("episode %s parked with %+v, want StepFailure on settle", ep, st.Attention)
		}
		code, out := starterCmd(t, bin, c, pipelinesFile, "episode", "show", "--pipeline", "settle-exec", "--episode", ep)
		if code != 0 {
			t.Fatalf("episode show: exit %d\n%s", code, out)
		}
		t.Logf("episode show:\n%s", out)
		for _, want := range []string{allot.StepFailure, "exited 3", "the source table is missing"} {
			if !strings.Contains(out, want) {
				t.Errorf("episode show of %s does not say %q:\n%s", ep, want, out)
			}
		}
		for _, line := range strings.Split(out, "\n") {
			if _, r, ok := strings.Cut(line, "remedy: "); ok {
				remedies[ep] = append(remedies[ep], strings.TrimSpace(r))
			}
		}
	}
	pick := func(ep, flag string) string {
		for _, r := range remedies[ep] {
			if strings.HasPrefix(r, "starter episode resolve --pipeline settle-exec --episode "+ep+" --step settle "+flag) {
				return r
			}
		}
		t.Fatalf("episode show of %s prints no %s remedy: %q", ep, flag, remedies[ep])
		return ""
	}
	s.run(pick(abandoned, "--abandon"))
	if final := c.WaitEpisode("settle-exec", abandoned); final.Stage != allot.StageCompleted {
		t.Fatalf("after --abandon: %+v", final)
	}
	if err := os.WriteFile(fixed, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s.run(pick(retried, "--retry"))
	if final := c.WaitEpisode("settle-exec", retried); final.Stage != allot.StageCompleted {
		t.Fatalf("after --retry: %+v", final)
	}
	if total, err := os.ReadFile(filepath.Join(c.Dir, "artifacts", "settle-exec", retried, "total.txt")); err != nil || string(total) != "42\n" {
		t.Fatalf("the retried step wrote %q, %v", total, err)
	}
	c.MustCheck()
}
