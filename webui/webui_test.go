//go:build unix

package webui_test

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/internal/allottest"
	"allot/internal/chromiumtest"
	"allot/internal/devstack"
	"allot/workflows"
)

const (
	demoPipeline = devstack.DemoPipeline
	// decoyPipeline is a pipeline the embedded demo does not have: the test
	// starts one idle workflow tagged with it, so that the pipeline query
	// has something to leave out.
	decoyPipeline = "other-pipeline"
	// decoyTaskQueue is polled by nobody: the decoy stays running, untouched.
	decoyTaskQueue = "webui-test-idle"
)

// TestWebUIListsPipelineAndShowsEpisode drives the embedded Temporal Web UI
// with headless Chromium: the workflow list filtered by a search-attribute
// query shows the demo pipeline's ScheduledRun and Episode and nothing of
// another pipeline; the Episode's page shows its episode ID; a screenshot of
// that page is kept as a test artifact.
func TestWebUIListsPipelineAndShowsEpisode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the embedded Temporal server and a browser")
	}
	br := newBrowser(t) // skips (or, under CI, fails) before the slow part

	info := allottest.StartDev(t, t.TempDir()).Info
	if info.WebUI == "" {
		t.Fatalf("dev setup has no Web UI: %+v", info)
	}
	nominal := time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC)
	episodeID := allottest.RunDemoEpisode(t, info, nominal)
	if episodeID != "2026-W32-0" {
		t.Fatalf("demo episode %q, want 2026-W32-0", episodeID)
	}
	scheduledID := allot.AllocationKey(demoPipeline, nominal)
	episodeWF := allot.EpisodeWorkflowID(demoPipeline, episodeID)
	decoyWF := allot.EpisodeWorkflowID(decoyPipeline, episodeID)

	c := allottest.DialDev(t, info)
	startDecoy(t, c, decoyWF)
	episodeRun := describeRun(t, c, episodeWF)

	ns := url.PathEscape(info.Namespace)
	listURL := func(query string) string {
		u := info.WebUI + "/namespaces/" + ns + "/workflows"
		if query != "" {
			u += "?query=" + url.QueryEscape(query)
		}
		return u
	}

	// Without a query the list shows the decoy: it is visible to the UI, so
	// its absence below is the query's doing.
	t.Run("unfiltered list shows both pipelines", func(t *testing.T) {
		br.textUntil(t, "list-all", listURL(""), func(text string) error {
			return containsAll(text, episodeWF, scheduledID, decoyWF)
		})
	})

	t.Run("pipeline query lists only that pipeline", func(t *testing.T) {
		query := fmt.Sprintf("%s = %q", workflows.PipelineAttr.GetName(), demoPipeline)
		text := br.textUntil(t, "list-pipeline", listURL(query), func(text string) error {
			// The query shows as the list's filter, and the rows are there.
			return containsAll(text, query, episodeWF, scheduledID)
		})
		if strings.Contains(text, decoyPipeline) {
			t.Errorf("the list for %s shows the other pipeline's workflow %s", query, decoyWF)
		}
		ids := workflowIDPattern.FindAllString(text, -1)
		if len(ids) == 0 {
			t.Fatalf("no workflow IDs found in the rendered list")
		}
		for _, id := range ids {
			if !strings.HasPrefix(id, demoPipeline+"/") {
				t.Errorf("the list for %s shows %q, not a %s workflow", query, id, demoPipeline)
			}
		}
	})

	episodeURL := info.WebUI + "/namespaces/" + ns + "/workflows/" + url.PathEscape(episodeWF) + "/" + url.PathEscape(episodeRun) + "/history"

	t.Run("episode page shows the episode ID", func(t *testing.T) {
		br.textUntil(t, "episode", episodeURL, func(text string) error {
			if err := containsAll(text, episodeWF, episodeRun, "Completed"); err != nil {
				return err
			}
			// The Input card renders the Episode's input as JSON; compare
			// without the whitespace the highlighting puts between tokens.
			return containsAll(strings.Join(strings.Fields(text), ""), `"episode_id":"`+episodeID+`"`)
		})
	})

	t.Run("screenshot of the episode page", func(t *testing.T) {
		path := filepath.Join(chromiumtest.ArtifactDir(t), "webui-episode.png")
		br.screenshot(t, episodeURL, path)
		chromiumtest.CheckPNG(t, path)
		t.Logf("screenshot of %s: %s", episodeURL, path)
	})
}

// workflowIDPattern finds allot workflow IDs in rendered text:
// <pipeline>/episode/<episode> and <pipeline>/scheduled-<time>.
var workflowIDPattern = regexp.MustCompile(`[a-z0-9][a-z0-9-]*/(?:episode/\d{4}-[A-Z0-9]+-\d+|scheduled-\d{4}-\d\d-\d\dT[0-9:]+Z)`)

func containsAll(s string, parts ...string) error {
	var missing []string
	for _, p := range parts {
		if !strings.Contains(s, p) {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %q", missing)
	}
	return nil
}

// ---- the dev setup ----

// startDecoy starts a workflow of another pipeline on a task queue nobody
// polls: it stays running and only serves as something the pipeline query
// must leave out.
func startDecoy(t *testing.T, c client.Client, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        id,
		TaskQueue: decoyTaskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.PipelineAttr.ValueSet(decoyPipeline),
		),
	}, workflows.EpisodeWorkflow, workflows.EpisodeInput{Pipeline: decoyPipeline, EpisodeID: "2026-W32-0"})
	if err != nil {
		t.Fatalf("starting the decoy workflow: %v", err)
	}
}

func describeRun(t *testing.T, c client.Client, workflowID string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := c.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		t.Fatal(err)
	}
	return d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
}

// ---- Chromium ----

// browser runs one headless Chromium per page load, with a fresh profile,
// bounded by a timeout, and kills its whole process group afterwards.
type browser struct {
	bin string
}

func newBrowser(t *testing.T) browser {
	t.Helper()
	return browser{bin: chromiumtest.Bin(t)}
}

// pageTimeout bounds one Chromium run; renderBudget is the virtual time the
// page gets to load and render before Chromium dumps or shoots it.
const (
	pageTimeout  = 60 * time.Second
	renderBudget = "15000"
	pollTimeout  = 90 * time.Second
)

// run starts Chromium with args and returns what it wrote on stdout.
func (b browser) run(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	// Everything of this run (profile, config and cache, crash database,
	// output) lives under one fresh directory, whose path also marks the
	// run's processes.
	dir, err := os.MkdirTemp("", "allot-webui-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	// Stdout and stderr go to files, not pipes: a leftover child holding a
	// pipe cannot then keep Wait from returning.
	stdout, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdout.Close() }()
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stderr.Close() }()

	ctx, cancel := context.WithTimeout(context.Background(), pageTimeout)
	defer cancel()
	cmd := chromiumtest.Command(ctx, b.bin, dir, args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", b.bin, err)
	}
	runErr := cmd.Wait()
	chromiumtest.Kill(cmd, dir)
	if ctx.Err() != nil {
		runErr = fmt.Errorf("chromium did not finish within %v: %w", pageTimeout, ctx.Err())
	}
	out, err := os.ReadFile(stdout.Name())
	if err != nil {
		t.Fatal(err)
	}
	if runErr != nil {
		errOut, _ := os.ReadFile(stderr.Name())
		return out, fmt.Errorf("%v; stderr ends: %s", runErr, tail(errOut, 2000))
	}
	return out, nil
}

// textUntil loads url until the visible text of the rendered DOM satisfies
// ok, and returns that text; it fails the test after pollTimeout. The last
// DOM is kept as an artifact either way.
func (b browser) textUntil(t *testing.T, name, url string, ok func(text string) error) string {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for attempt := 1; ; attempt++ {
		out, err := b.run(t, "--virtual-time-budget="+renderBudget, "--dump-dom", url)
		text := chromiumtest.VisibleText(string(out))
		if err == nil {
			err = ok(text)
		}
		if err == nil || time.Now().After(deadline) {
			path := filepath.Join(chromiumtest.ArtifactDir(t), "webui-"+name+".html")
			if werr := os.WriteFile(path, out, 0o644); werr != nil {
				t.Logf("saving the DOM: %v", werr)
			}
			if err != nil {
				t.Fatalf("%s: after %d loads: %v (last DOM: %s)", url, attempt, err, path)
			}
			t.Logf("%s: rendered after %d load(s); DOM saved to %s", url, attempt, path)
			return text
		}
		time.Sleep(time.Second)
	}
}

func (b browser) screenshot(t *testing.T, url, path string) {
	t.Helper()
	_ = os.Remove(path)
	if _, err := b.run(t, "--virtual-time-budget="+renderBudget, "--hide-scrollbars",
		"--window-size=1400,1000", "--screenshot="+path, url); err != nil {
		t.Fatalf("screenshot of %s: %v", url, err)
	}
}

func tail(b []byte, n int) []byte {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
