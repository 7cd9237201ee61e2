//go:build unix

package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"allot"
	"allot/internal/allottest"
	"allot/internal/chromiumtest"
	"allot/internal/cleanenv"
	"allot/internal/console"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/internal/report"
)

// TestBrowserShowsTheBoardAndItsLiveUpdate drives the operator page with
// headless Chromium, as webui's test drives the Web UI: the rendered page
// shows each budget's figures as `starter budget list --json` prints them
// for the same ledger and pipeline file, and the parked episode with its
// remedy; with the page open, a ledger write shows on it without a
// reload; a screenshot is kept.
func TestBrowserShowsTheBoardAndItsLiveUpdate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the starter and starts a browser")
	}
	br := newBrowser(t) // skips (or, under CI, fails) before the slow part

	// The budget fixture's ledger (its fourth episode parked on
	// video-weekly), with a paused vendor. Without Temporal, a parked
	// episode's remedy is its show command.
	l, eps := ledgertest.BudgetLedger(t)
	if _, err := l.Led.PauseVendor(context.Background(), ledger.VendorPause{Vendor: "covers", Reason: "the covers bill is disputed", By: "test"}); err != nil {
		t.Fatal(err)
	}
	in := console.ReadInput{Ledger: l.Led, Pipelines: ledgertest.BudgetPipelines(t),
		Now: ledgertest.BudgetMonday.Add(3 * time.Hour), WebUI: "http://ui.test", Namespace: "ns"}
	// What the page must show, read as the page reads it.
	want, err := console.Read(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	remedy := allot.ShowCommand("weekly", eps[3].ID)

	// The page's /events connections, as the server sees them: the live
	// check writes to the ledger once the open page listens.
	events := make(chan struct{}, 16)
	page := console.NewServer(in, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/events" {
			select {
			case events <- struct{}{}:
			default:
			}
		}
		page.ServeHTTP(w, r)
	}))
	// Closed after the browser (cleanups run last first): its open /events
	// stream would keep Close waiting.
	t.Cleanup(srv.Close)
	pageURL := srv.URL + "/"

	// One page kept open for the whole test: --dump-dom and --screenshot
	// wait for the virtual time budget, which the page's open /events
	// stream never lets run out.
	tab := br.open(t, pageURL)

	t.Run("budgets equal starter budget list --json", func(t *testing.T) {
		list := budgetList(t, "sqlite:"+l.Path, ledgertest.BudgetSet)
		dom := tab.eval(t, "document.documentElement.outerHTML")
		path := filepath.Join(chromiumtest.ArtifactDir(t), "operator-page.html")
		if err := os.WriteFile(path, []byte(dom), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("the page's DOM: %s", path)
		sections := budgetSections(dom)
		if len(sections) != len(want.Money) || len(want.Money) == 0 {
			t.Fatalf("the page shows %d budgets, the board has %d:\n%s", len(sections), len(want.Money), chromiumtest.VisibleText(dom))
		}
		for _, row := range want.Money {
			text, ok := sections[row.Budget]
			if !ok {
				t.Errorf("the page shows no budget %s", row.Budget)
				continue
			}
			p := listedPeriod(t, list, row.Budget, row.Period.Period)
			m := func(minor int64) string { return allot.Money{Amount: minor, Currency: p.Currency}.String() }
			// budget list prints no forecast: the page's is the board's,
			// which is settled and reserved (compared above) plus upcoming.
			for label, figure := range map[string]string{
				"limit": m(p.Limit), "settled (ledger)": m(p.Settled), "reserved (ledger)": m(p.Reserved),
				"free": m(p.Free), "forecast": m(row.Forecast),
			} {
				if !strings.Contains(text, " "+label+" "+figure+" ") {
					t.Errorf("%s %s: the page does not show %s %s (budget list --json: %+v):\n%s", row.Budget, p.Period, label, figure, p, text)
				}
			}
			if !strings.Contains(text, row.Budget+" "+p.Period+" ") {
				t.Errorf("%s: the page does not show the period %s:\n%s", row.Budget, p.Period, text)
			}
		}
		text := chromiumtest.VisibleText(dom)
		if !strings.Contains(text, eps[3].ID) || !strings.Contains(text, remedy) {
			t.Errorf("the page does not show the parked episode %s with its remedy %q:\n%s", eps[3].ID, remedy, text)
		}
	})

	t.Run("needs: what blocks most first, with its age", func(t *testing.T) {
		raw := tab.evalRaw(t, `Array.from(document.querySelectorAll('li.need .title')).map(e => e.textContent)`)
		var titles []string
		if err := json.Unmarshal([]byte(raw), &titles); err != nil {
			t.Fatal(err)
		}
		vendor := slices.IndexFunc(titles, func(s string) bool { return strings.HasPrefix(s, "vendor covers is paused") })
		parked := slices.IndexFunc(titles, func(s string) bool { return strings.HasPrefix(s, "episode "+eps[3].ID) })
		if vendor < 0 || parked < 0 || vendor > parked {
			t.Fatalf("the page lists %q: want the paused vendor, which blocks every step it serves, above the parked episode", titles)
		}
		// Parked at Monday 00:00, read at 03:00 (the fixture's times).
		if !strings.Contains(titles[parked], "waiting 3 h") {
			t.Errorf("the parked episode does not say how long it has waited: %q", titles[parked])
		}
	})

	t.Run("screenshot", func(t *testing.T) {
		path := filepath.Join(chromiumtest.ArtifactDir(t), "operator-page.png")
		tab.screenshot(t, path)
		chromiumtest.CheckPNG(t, path)
		t.Logf("screenshot of the operator page: %s", path)
		if os.Getenv("ALLOT_UPDATE_SCREENSHOT") == "1" {
			png, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// The test runs in internal/console; the docs are the repo's.
			if err := os.WriteFile(filepath.Join("..", "..", "docs", "operator-page.png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Log("docs/operator-page.png updated")
		}
	})

	t.Run("live update", func(t *testing.T) {
		select {
		case <-events:
		case <-time.After(allottest.Within(t, 60*time.Second)):
			t.Fatal("the open page never connected to /events")
		}
		board := func() string { return tab.eval(t, "document.getElementById('board').innerText") }
		if text := board(); strings.Contains(text, eps[2].ID) {
			t.Fatalf("episode %s shows before it is parked:\n%s", eps[2].ID, text)
		}
		wrote := time.Now()
		if err := in.Ledger.RecordEpisodeOutcome(context.Background(), "weekly", eps[2].ID, allot.OutcomeNeedsAttention, allot.BudgetExhausted, ledgertest.BudgetMonday); err != nil {
			t.Fatal(err)
		}
		deadline := allottest.Deadline(t, 30*time.Second)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			text := board()
			if strings.Contains(text, eps[2].ID) {
				t.Logf("live update: %v from the ledger write to the open page showing the parked episode", time.Since(wrote).Round(time.Millisecond))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the open page did not show episode %s parked by %v:\n%s", eps[2].ID, deadline, text)
			}
			<-tick.C
		}
	})

}

// budgetList runs the built starter's `budget list --json` against the
// ledger at url and the pipeline file toml.
func budgetList(t *testing.T, url, toml string) report.BudgetsResult {
	t.Helper()
	dir := t.TempDir()
	pipelines := filepath.Join(dir, "pipelines.toml")
	if err := os.WriteFile(pipelines, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	starter := allottest.Starter{Bin: allottest.BuildBinary(t, "allot/starter"), Dir: dir, Env: cleanenv.Environ(
		"ALLOT_PIPELINES="+pipelines, "ALLOT_LEDGER="+url, "TEMPORAL_ADDRESS=127.0.0.1:1")}
	var list report.BudgetsResult
	starter.JSON(t, &list, "budget", "list")
	return list
}

func listedPeriod(t *testing.T, list report.BudgetsResult, budget, period string) report.BudgetPeriodView {
	t.Helper()
	i := slices.IndexFunc(list.Budgets, func(b report.BudgetView) bool { return b.Name == budget })
	if i < 0 {
		t.Fatalf("budget list --json has no %s: %+v", budget, list)
	}
	for _, p := range list.Budgets[i].Periods {
		if p.Period == period {
			return p
		}
	}
	t.Fatalf("budget list --json has no period %s of %s: %+v", period, budget, list.Budgets[i])
	return report.BudgetPeriodView{}
}

var budgetDiv = regexp.MustCompile(`<div class="budget">`)

// budgetSections is the visible text of each budget's part of a dumped
// page, by budget name (its heading's first word), padded with spaces.
func budgetSections(dom string) map[string]string {
	parts := budgetDiv.Split(dom, -1)
	out := map[string]string{}
	for _, p := range parts[1:] {
		if end := strings.Index(p, "</section>"); end >= 0 {
			p = p[:end]
		}
		text := chromiumtest.VisibleText(p)
		name, _, _ := strings.Cut(text, " ")
		out[name] = " " + text + " "
	}
	return out
}

// ---- Chromium (as webui's test runs it) ----

// browser runs headless Chromium with a fresh profile per run, bounded by
// a timeout, and kills its whole process group afterwards.
type browser struct {
	bin string
}

func newBrowser(t *testing.T) browser {
	t.Helper()
	return browser{bin: chromiumtest.Bin(t)}
}

// browserTimeout bounds one Chromium: the whole test's page.
const browserTimeout = 3 * time.Minute

// chromium is one started Chromium; stop ends it and everything it
// started.
type chromium struct {
	cmd            *exec.Cmd
	dir            string
	stdout, stderr *os.File
	cancel         context.CancelFunc
	ctx            context.Context
}

// start starts Chromium with args; extra become its file descriptors 3
// and up.
func (b browser) start(t *testing.T, extra []*os.File, args ...string) *chromium {
	t.Helper()
	// Everything of this run (profile, config and cache, crash database,
	// output) lives under one fresh directory, whose path also marks the
	// run's processes.
	dir, err := os.MkdirTemp("", "allot-console-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	c := &chromium{dir: dir}
	// Stdout and stderr go to files, not pipes: a leftover child holding a
	// pipe cannot then keep Wait from returning.
	if c.stdout, err = os.Create(filepath.Join(dir, "stdout")); err != nil {
		t.Fatal(err)
	}
	if c.stderr, err = os.Create(filepath.Join(dir, "stderr")); err != nil {
		t.Fatal(err)
	}
	c.ctx, c.cancel = context.WithTimeout(context.Background(), allottest.Within(t, browserTimeout))
	cmd := chromiumtest.Command(c.ctx, b.bin, dir, args...)
	cmd.Stdout, cmd.Stderr = c.stdout, c.stderr
	cmd.ExtraFiles = extra
	if err := cmd.Start(); err != nil {
		c.cancel()
		t.Fatalf("starting %s: %v", b.bin, err)
	}
	c.cmd = cmd
	return c
}

// stop kills Chromium and whatever it started.
func (c *chromium) stop() {
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	_ = c.cmd.Wait()
	chromiumtest.Kill(c.cmd, c.dir)
	c.cancel()
	_ = c.stdout.Close()
	_ = c.stderr.Close()
	_ = os.RemoveAll(c.dir)
}

// ---- a page kept open: the DevTools protocol over a pipe ----

// tab is a page open in a Chromium driven over --remote-debugging-pipe:
// JSON messages, each ended by a NUL, read by Chromium on its fd 3 and
// written on its fd 4. --dump-dom dumps at load, so a change after load
// needs the page kept open and read again.
type tab struct {
	mu      sync.Mutex
	in      *os.File // Chromium's fd 3
	out     *bufio.Reader
	outFile *os.File // Chromium's fd 4
	id      int
	session string
}

// open starts Chromium, opens url in a new tab and attaches to it; the
// browser is killed when the test ends.
func (b browser) open(t *testing.T, url string) *tab {
	t.Helper()
	toChromeR, toChromeW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromChromeR, fromChromeW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := b.start(t, []*os.File{toChromeR, fromChromeW}, "--remote-debugging-pipe", "--hide-scrollbars", "--window-size=1280,1600", "about:blank")
	// Chromium holds its ends now.
	_ = toChromeR.Close()
	_ = fromChromeW.Close()
	tb := &tab{in: toChromeW, out: bufio.NewReader(fromChromeR), outFile: fromChromeR}
	t.Cleanup(func() {
		_ = toChromeW.Close()
		_ = fromChromeR.Close()
		c.stop()
	})
	var created struct {
		TargetID string `json:"targetId"`
	}
	tb.call(t, "Target.createTarget", map[string]any{"url": url, "newWindow": true, "width": 1280, "height": 1600}, &created)
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	tb.call(t, "Target.attachToTarget", map[string]any{"targetId": created.TargetID, "flatten": true}, &attached)
	tb.session = attached.SessionID
	// The page is open once its board is there: wait for it.
	deadline := allottest.Deadline(t, 30*time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for tb.evalRaw(t, "document.readyState === 'complete' && !!document.getElementById('board')") != "true" {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not load in the open tab", url)
		}
		<-tick.C
	}
	return tb
}

// call sends one command and decodes its result into result (when not
// nil), skipping the events in between.
func (tb *tab) call(t *testing.T, method string, params any, result any) {
	t.Helper()
	if err := tb.try(t, method, params, result); err != nil {
		t.Fatal(err)
	}
}

// try is call returning the command's error: a page navigating away
// loses its context for a moment.
func (tb *tab) try(t *testing.T, method string, params any, result any) error {
	t.Helper()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.id++
	msg := map[string]any{"id": tb.id, "method": method, "params": params}
	if tb.session != "" {
		msg["sessionId"] = tb.session
	}
	b, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.in.Write(append(b, 0)); err != nil {
		t.Fatalf("CDP %s: %v", method, err)
	}
	if err := tb.outFile.SetReadDeadline(allottest.Deadline(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	for {
		line, err := tb.out.ReadBytes(0)
		if err != nil {
			t.Fatalf("CDP %s: no answer: %v", method, err)
		}
		var reply struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line[:len(line)-1], &reply); err != nil {
			t.Fatalf("CDP %s: %v in %q", method, err, line)
		}
		if reply.ID != tb.id {
			continue // an event, or another session's answer
		}
		if reply.Error != nil {
			return fmt.Errorf("CDP %s: %s", method, reply.Error.Message)
		}
		if result != nil {
			if err := json.Unmarshal(reply.Result, result); err != nil {
				t.Fatalf("CDP %s: %v in %s", method, err, reply.Result)
			}
		}
		return nil
	}
}

// text is the page's visible text, "" while it navigates.
func (tb *tab) text(t *testing.T) string {
	t.Helper()
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct{} `json:"exceptionDetails"`
	}
	if tb.try(t, "Runtime.evaluate", map[string]any{"expression": "document.body ? document.body.innerText : ''", "returnByValue": true}, &res) != nil || res.ExceptionDetails != nil {
		return ""
	}
	var s string
	_ = json.Unmarshal(res.Result.Value, &s)
	return s
}

// evalRaw evaluates expression in the page and returns its value as JSON.
func (tb *tab) evalRaw(t *testing.T, expression string) string {
	t.Helper()
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	tb.call(t, "Runtime.evaluate", map[string]any{"expression": expression, "returnByValue": true}, &res)
	if res.ExceptionDetails != nil {
		t.Fatalf("evaluating %s: %s", expression, res.ExceptionDetails.Text)
	}
	return string(res.Result.Value)
}

// eval evaluates a string expression in the page.
func (tb *tab) eval(t *testing.T, expression string) string {
	t.Helper()
	var s string
	if raw := tb.evalRaw(t, expression); json.Unmarshal([]byte(raw), &s) != nil {
		t.Fatalf("%s is %s, not a string", expression, raw)
	}
	return s
}

// screenshot writes a PNG of the tab's page to path.
func (tb *tab) screenshot(t *testing.T, path string) {
	t.Helper()
	var shot struct {
		Data []byte `json:"data"` // base64 in JSON
	}
	tb.call(t, "Page.captureScreenshot", map[string]any{"format": "png"}, &shot)
	if err := os.WriteFile(path, shot.Data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// ---- artifacts ----
