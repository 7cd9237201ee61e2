package e2e

import (
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"allot"
	"allot/internal/allottest"
	"allot/internal/cleanenv"
	"allot/internal/pipelinetest"
)

// pageLine is `starter console`'s line naming the page it serves.
var pageLine = regexp.MustCompile(`operator page: (http://\S+)`)

// The operator page's documented commands run as written against a real
// server, worker and ledger: each serves the page (a parked episode with
// its command), links workflows to the Web UI given, and stops at SIGINT
// with exit 0.
func TestConsoleServesThePageAsDocumented(t *testing.T) {
	toml := docsPipelines(t)
	c := allottest.NewClusterWithPipelines(t, []byte(toml))
	ep := c.Allocate("weekly-video", time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC))
	c.WaitStage("weekly-video", ep, allot.StageWaitingApproval)
	bin := allottest.BuildBinary(t, "allot/starter")
	pipelinesFile := pipelinetest.Write(t, t.TempDir(), toml)
	for _, line := range []string{
		`starter console --addr 127.0.0.1:8091 --web-ui http://127.0.0.1:8233`, // docs/operating.md
		`starter console --web-ui http://127.0.0.1:8080`,                       // docs/deploying.md
	} {
		args := allottest.SplitCommand(t, line)[1:]
		cmd := exec.Command(bin, args...)
		cmd.Env = cleanenv.Environ(
			"TEMPORAL_ADDRESS="+c.Server.GetFrontendHostPort(),
			"TEMPORAL_NAMESPACE="+c.Namespace,
			"ALLOT_LEDGER="+c.LedgerURL,
			"ALLOT_PIPELINES="+pipelinesFile,
		)
		p := allottest.StartProcess(t, cmd)
		url := p.WaitOutput(t, pageLine, 2*time.Minute)[1]
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page := string(body)
		webUI := regexp.MustCompile(`--web-ui (\S+)`).FindStringSubmatch(line)[1]
		if resp.StatusCode != http.StatusOK || !strings.Contains(page, allot.ApproveCommand("weekly-video", ep)) ||
			!strings.Contains(page, webUI+"/namespaces/"+c.Namespace+"/workflows/") {
			t.Fatalf("%s: %d: the page lacks the waiting episode's approve command or its Web UI link:\n%s", line, resp.StatusCode, page)
		}
		p.Signal(t, syscall.SIGINT)
		if err := p.Wait(t, time.Minute); err != nil {
			t.Fatalf("%s: exit after SIGINT = %v, want 0\n%s", line, err, p.Output.String())
		}
	}
}
