//go:build unix

package webui_test

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"image"
	"image/png"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/internal/allottest"
	"allot/internal/cleanenv"
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
		path := filepath.Join(artifactDir(t), "webui-episode.png")
		br.screenshot(t, episodeURL, path)
		checkPNG(t, path)
		t.Logf("screenshot of %s: %s", episodeURL, path)
	})
}

// workflowIDPattern finds allot workflow IDs in rendered text:
// <pipeline>/episode/<episode> and <pipeline>/scheduled-<time>.
var workflowIDPattern = regexp.MustCompile(`[a-z0-9][a-z0-9-]*/(?:episode/\d{4}-[A-Z0-9]+-\d+|scheduled-\d{4}-\d\d-\d\dT[0-9:]+Z)`)

var (
	invisible = regexp.MustCompile(`(?is)<head\b.*?</head>|<script\b.*?</script>|<style\b.*?</style>|<template\b.*?</template>`)
	tag       = regexp.MustCompile(`(?s)<[^>]*>`)
)

// visibleText is the text of a dumped DOM as a reader sees it: no head,
// scripts, styles or markup (attributes, hrefs), entities decoded, runs of
// whitespace as one space.
func visibleText(dom string) string {
	s := invisible.ReplaceAllString(dom, " ")
	s = tag.ReplaceAllString(s, " ")
	return strings.Join(strings.Fields(html.UnescapeString(s)), " ")
}

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
	if p := os.Getenv("ALLOT_CHROMIUM"); p != "" {
		bin, err := exec.LookPath(p)
		if err != nil {
			t.Fatalf("ALLOT_CHROMIUM=%q: %v", p, err)
		}
		return browser{bin: bin}
	}
	if bin, err := exec.LookPath("/usr/bin/chromium"); err == nil {
		return browser{bin: bin}
	}
	if bin, err := exec.LookPath("chromium"); err == nil {
		return browser{bin: bin}
	}
	const msg = "no Chromium: set ALLOT_CHROMIUM, or install it (apt-get update && apt-get install -y chromium)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg + "; CI is set, so this test must run")
	}
	t.Skip(msg)
	return browser{}
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
	full := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking",
		"--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--disable-crash-reporter", "--disable-breakpad",
		"--user-data-dir=" + filepath.Join(dir, "profile"),
	}, args...)
	cmd := exec.CommandContext(ctx, b.bin, full...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Chromium keeps its crash database and caches under the XDG
	// directories, not the profile: point them into dir too.
	cmd.Env = cleanenv.Environ(
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"XDG_CACHE_HOME="+filepath.Join(dir, "cache"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", b.bin, err)
	}
	runErr := cmd.Wait()
	// Whatever Chromium left behind (renderers, zygotes, the wrapper's
	// children) goes with the group; helpers that left the group (the crash
	// handler starts its own session) are found by dir on their command line.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	killByArgument(dir)
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

// killByArgument kills every process whose command line contains arg (a
// unique temporary path), by PID. It reads /proc, so elsewhere than on Linux
// it does nothing.
func killByArgument(arg string) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(arg)) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// textUntil loads url until the visible text of the rendered DOM satisfies
// ok, and returns that text; it fails the test after pollTimeout. The last
// DOM is kept as an artifact either way.
func (b browser) textUntil(t *testing.T, name, url string, ok func(text string) error) string {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for attempt := 1; ; attempt++ {
		out, err := b.run(t, "--virtual-time-budget="+renderBudget, "--dump-dom", url)
		text := visibleText(string(out))
		if err == nil {
			err = ok(text)
		}
		if err == nil || time.Now().After(deadline) {
			path := filepath.Join(artifactDir(t), "webui-"+name+".html")
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

// checkPNG asserts the screenshot is a real rendering: a PNG at least 1000
// pixels wide with more than a handful of colours (a blank or single-colour
// page fails).
func checkPNG(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	defer func() { _ = f.Close() }()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s is no PNG: %v", path, err)
	}
	bounds := img.Bounds()
	if bounds.Dx() < 1000 || bounds.Dy() < 500 {
		t.Errorf("screenshot is %dx%d, want at least 1000x500", bounds.Dx(), bounds.Dy())
	}
	if n := countColours(img, 64); n < 8 {
		t.Errorf("screenshot has %d distinct colours: a blank page, not the UI", n)
	}
}

// countColours counts distinct colours, stopping at limit.
func countColours(img image.Image, limit int) int {
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
			if len(seen) >= limit {
				return len(seen)
			}
		}
	}
	return len(seen)
}

// artifactDir is where the test keeps files for a human to look at after
// it ends: $ALLOT_TEST_ARTIFACTS, else <tmp>/allot-test-artifacts.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ALLOT_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "allot-test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func tail(b []byte, n int) []byte {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
