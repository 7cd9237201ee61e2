package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"allot"
	"allot/internal/allottest"
	"allot/internal/cleanenv"
	"allot/internal/pipelinetest"
	"allot/workflows"
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

// The documented way to let operators act: operator-token makes the token
// file, and the console serves with it on every address; an operator
// signs in with the token and approves the waiting episode through the
// page, which the episode's workflow and the ledger then show, with who
// and why. The token is printed nowhere.
func TestConsoleActsAsDocumented(t *testing.T) {
	toml := docsPipelines(t)
	c := allottest.NewClusterWithPipelines(t, []byte(toml))
	ep := c.Allocate("weekly-video", time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC))
	c.WaitStage("weekly-video", ep, allot.StageWaitingApproval)
	bin := allottest.BuildBinary(t, "allot/starter")
	pipelinesFile := pipelinetest.Write(t, t.TempDir(), toml)
	tokens := filepath.Join(t.TempDir(), "console-tokens")
	env := cleanenv.Environ(
		"TEMPORAL_ADDRESS="+c.Server.GetFrontendHostPort(),
		"TEMPORAL_NAMESPACE="+c.Namespace,
		"ALLOT_LEDGER="+c.LedgerURL,
		"ALLOT_PIPELINES="+pipelinesFile,
	)
	asDocumented := func(line string) []string {
		return allottest.SplitCommand(t, strings.ReplaceAll(line, "/etc/allot/console-tokens", tokens))[1:]
	}
	mk := exec.Command(bin, asDocumented(`starter operator-token --name alice --file /etc/allot/console-tokens`)...)
	mk.Env = env
	out, err := mk.CombinedOutput()
	if err != nil {
		t.Fatalf("operator-token: %v\n%s", err, out)
	}
	data, err := os.ReadFile(tokens)
	if err != nil {
		t.Fatal(err)
	}
	_, token, _ := strings.Cut(strings.TrimSpace(string(data)), ":")

	cmd := exec.Command(bin, asDocumented(`starter console --addr 0.0.0.0:8090 --token-file /etc/allot/console-tokens --web-ui http://127.0.0.1:8080`)...)
	cmd.Env = env
	p := allottest.StartProcess(t, cmd)
	page := strings.Replace(p.WaitOutput(t, pageLine, 2*time.Minute)[1], "0.0.0.0", "127.0.0.1", 1)
	origin := strings.TrimSuffix(page, "/")
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	post := func(path string, form url.Values) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, origin+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK { // after the 303 to the page
			t.Fatalf("POST %s = %d\n%s", path, resp.StatusCode, body)
		}
		return string(body)
	}
	if body := post("/login", url.Values{"token": {token}}); !strings.Contains(body, "Signed in as <strong>alice</strong>") {
		t.Fatalf("signing in with the token did not sign alice in:\n%s", body)
	}
	resp, err := hc.Get(page)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("the signed-in page has no form:\n%s", body)
	}
	done := post("/act", url.Values{"csrf": {string(m[1])}, "act": {"approve"}, "pipeline": {"weekly-video"}, "episode": {ep}, "reason": {"looks right"}})
	if !strings.Contains(done, "approve sent to episode "+ep+" of weekly-video by alice") {
		t.Fatalf("the page does not say the approval was sent:\n%s", done)
	}
	c.WaitState("weekly-video", ep, "past its approval", func(st workflows.EpisodeState) bool { return st.Stage != allot.StageWaitingApproval })
	ds, err := c.Ledger.Decisions(context.Background(), "weekly-video", ep)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) == 0 || ds[0].Action != allot.ActionApprove || ds[0].By != "alice" || ds[0].Reason != "looks right" {
		t.Fatalf("the ledger's decisions %+v lack alice's approval with her reason", ds)
	}
	p.Signal(t, syscall.SIGINT)
	if err := p.Wait(t, time.Minute); err != nil {
		t.Fatalf("exit after SIGINT = %v\n%s", err, p.Output.String())
	}
	if strings.Contains(p.Output.String()+string(out), token) {
		t.Fatal("the token was printed")
	}
}
