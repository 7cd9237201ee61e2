//go:build unix

package console_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/allottest"
	"allot/internal/chromiumtest"
	"allot/internal/devstack"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/pipeline"
	"allot/workflows"
)

// demoBudget is the budget the demo's pipeline file (pipeline/pipelines.toml)
// sets over its paid steps.
const demoBudget = "video-weekly"

// TestBrowserApprovesOnTheDevserversPage drives the page the devserver
// serves (devstack.Run, as `go run ./devserver` runs it, with approvals
// left to a person and the demo's pipeline file with its budget): the
// budget's figures equal `starter budget list --json`'s; an episode waits
// for approval on the page with its CLI command; the operator signs in with the token of the devserver's
// token file, gives a reason and approves; the page shows the change, and
// the ledger keeps who approved and why. The time from the click to the
// page showing it is logged (the goal is 2 s; tests assert no timings).
func TestBrowserApprovesOnTheDevserversPage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the dev stack and a browser")
	}
	br := newBrowser(t)
	dir := t.TempDir()
	demo, err := os.ReadFile(filepath.Join("..", "..", "pipeline", "pipelines.toml"))
	if err != nil {
		t.Fatal(err)
	}
	// The demo's own file: its paid steps carry a max_cost and its budget
	// (demoBudget) covers them.
	toml := string(demo)
	if !strings.Contains(toml, "name      = \""+demoBudget+"\"") || strings.Count(toml, "max_cost = ") < 2 {
		t.Fatalf("the demo pipeline file no longer has budget %s and two priced paid steps as this test expects", demoBudget)
	}
	pipelinesFile := filepath.Join(dir, "pipelines.toml")
	if err := os.WriteFile(pipelinesFile, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	dev := allottest.StartDevWith(t, devstack.Config{DataDir: dir, Headless: true, ConsoleAddr: "127.0.0.1:0", Pipelines: pipelinesFile})
	if dev.Info.Console == "" || dev.Info.ConsoleTokens == "" {
		t.Fatalf("the dev stack serves no page or names no token file: %+v", dev.Info)
	}

	// One run of the demo pipeline, whose episode waits at its approval
	// gate (AutoApprove is off).
	ctx, cancel := allottest.Context(t, 3*time.Minute)
	defer cancel()
	c := allottest.DialDev(t, dev.Info)
	set, err := pipeline.Load(pipelinesFile)
	if err != nil {
		t.Fatal(err)
	}
	runs := &operator.Runs{Client: c, Pipelines: set, TaskQueue: workflows.TaskQueue}
	res, err := runs.Run(ctx, operator.RunInput{Pipeline: devstack.DemoPipeline, NominalTime: time.Now().UTC().Truncate(time.Second), Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	ep := res.Result.EpisodeID
	title := "episode " + ep + " of " + devstack.DemoPipeline + " waits for approval"

	tab := br.open(t, dev.Info.Console)
	text := func() string { return tab.text(t) }
	waitFor := func(what string, ok func(string) bool) (string, time.Duration) {
		t.Helper()
		start := time.Now()
		deadline := allottest.Deadline(t, 60*time.Second)
		for {
			s := text()
			if ok(s) {
				return s, time.Since(start)
			}
			if time.Now().After(deadline) {
				t.Fatalf("the page did not show %s by %v:\n%s", what, deadline, s)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Read-only until signed in: the approval shows with its command.
	page, _ := waitFor("the episode waiting for approval", func(s string) bool { return strings.Contains(s, title) })
	if !strings.Contains(page, allot.ApproveCommand(devstack.DemoPipeline, ep)) || strings.Contains(page, "Signed in as") {
		t.Fatalf("before signing in, the page should show the approve command and no session:\n%s", page)
	}

	// The budget's figures are `starter budget list --json`'s, once both
	// read the same ledger (the episode's costs are settled by now).
	deadline := allottest.Deadline(t, 60*time.Second)
	for {
		list := budgetList(t, dev.Info.Ledger, toml)
		text, ok := budgetSections(tab.eval(t, "document.documentElement.outerHTML"))[demoBudget]
		if !ok {
			t.Fatalf("the page shows no budget %s:\n%s", demoBudget, text)
		}
		period := strings.Fields(text)[1]
		p := listedPeriod(t, list, demoBudget, period)
		m := func(minor int64) string { return allot.Money{Amount: minor, Currency: p.Currency}.String() }
		var differ []string
		for label, figure := range map[string]string{"limit": m(p.Limit), "settled (ledger)": m(p.Settled), "reserved (ledger)": m(p.Reserved), "free": m(p.Free)} {
			if !strings.Contains(text, " "+label+" "+figure+" ") {
				differ = append(differ, label+" "+figure)
			}
		}
		if len(differ) == 0 && p.Settled > 0 {
			t.Logf("budget %s %s on the page as in budget list --json: limit %s, settled %s, reserved %s, free %s", demoBudget, period, m(p.Limit), m(p.Settled), m(p.Reserved), m(p.Free))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page's budget differs from budget list --json (%v, settled %d):\n%s", differ, p.Settled, text)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Sign in with the devserver's token: typed into the form, never in
	// a URL.
	data, err := os.ReadFile(dev.Info.ConsoleTokens)
	if err != nil {
		t.Fatal(err)
	}
	name, token, ok := strings.Cut(strings.TrimSpace(string(data)), ":")
	if !ok || name != "dev" {
		t.Fatalf("the devserver's token file should hold one operator, dev: %d bytes", len(data))
	}
	js, _ := json.Marshal(token)
	tab.evalRaw(t, `(function(){var f=document.querySelector('form[action="/login"]'); f.elements.token.value=`+string(js)+`; f.submit(); return true})()`)
	waitFor("the signed-in operator", func(s string) bool { return strings.Contains(s, "Signed in as dev") })

	// Approve, with a reason, through the episode's own form.
	reason := "approved on the page <b>by the test</b>"
	rjs, _ := json.Marshal(reason)
	ejs, _ := json.Marshal(ep)
	clicked := time.Now()
	found := tab.evalRaw(t, `(function(){
  var forms = document.querySelectorAll('form.act');
  for (var i = 0; i < forms.length; i++) {
    var f = forms[i];
    if (f.elements.act.value === 'approve' && f.elements.episode && f.elements.episode.value === `+string(ejs)+`) {
      f.elements.reason.value = `+string(rjs)+`;
      f.querySelector('button[type=submit]').click();
      return true;
    }
  }
  return false;
})()`)
	if found != "true" {
		t.Fatalf("the signed-in page has no approve form for episode %s:\n%s", ep, text())
	}
	page, _ = waitFor("the approval done", func(s string) bool {
		return strings.Contains(s, "approve sent to episode "+ep) && !strings.Contains(s, title)
	})
	t.Logf("approve: %v from the click to the page showing the episode approved", time.Since(clicked).Round(time.Millisecond))
	if strings.Contains(page, token) {
		t.Fatal("the page shows the token")
	}

	// The ledger keeps who approved and why.
	led, err := ledger.OpenReadOnly(ctx, dev.Info.Ledger)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	ds, err := led.Decisions(context.Background(), devstack.DemoPipeline, ep)
	if err != nil {
		t.Fatal(err)
	}
	var approved bool
	for _, d := range ds {
		approved = approved || (d.Action == allot.ActionApprove && d.By == "dev" && d.Reason == reason)
	}
	if !approved {
		t.Fatalf("the ledger's decisions of episode %s lack an approval by dev with the reason: %+v", ep, ds)
	}

	path := filepath.Join(chromiumtest.ArtifactDir(t), "operator-page-approved.png")
	tab.screenshot(t, path)
	chromiumtest.CheckPNG(t, path)
	t.Logf("screenshot of the page after the approval: %s", path)

	// Two more runs wait at the gate: the page groups them under one
	// approve-all form, which records a decision each (issue 41 §1).
	var waiting []string
	for i := 1; i <= 2; i++ {
		res, err := runs.Run(ctx, operator.RunInput{Pipeline: devstack.DemoPipeline, NominalTime: time.Now().UTC().Truncate(time.Second).Add(time.Duration(i) * time.Second), Wait: true})
		if err != nil {
			t.Fatal(err)
		}
		waiting = append(waiting, res.Result.EpisodeID)
	}
	group := "2 episodes of " + devstack.DemoPipeline + " wait for approval"
	waitFor("the two approvals grouped", func(s string) bool { return strings.Contains(s, group) })
	all := "approved on the page, all at once"
	ajs, _ := json.Marshal(all)
	if found := tab.evalRaw(t, `(function(){
  var forms = document.querySelectorAll('form.act');
  for (var i = 0; i < forms.length; i++) {
    var f = forms[i];
    if (f.elements.act.value === 'approve-all') {
      f.elements.reason.value = `+string(ajs)+`;
      f.querySelector('button[type=submit]').click();
      return true;
    }
  }
  return false;
})()`); found != "true" {
		t.Fatalf("the page has no approve-all form for the two waiting episodes:\n%s", text())
	}
	page, _ = waitFor("both approved", func(s string) bool {
		return strings.Contains(s, "approved 2 of 2 episodes of "+devstack.DemoPipeline+" by dev") && !strings.Contains(s, group)
	})
	for _, ep := range waiting {
		if !strings.Contains(page, ep) {
			t.Errorf("the page's reply does not name episode %s:\n%s", ep, page)
		}
		ds, err := led.Decisions(context.Background(), devstack.DemoPipeline, ep)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, d := range ds {
			if d.Action == allot.ActionApprove && d.By == "dev" && d.Reason == all {
				n++
			}
		}
		if n != 1 {
			t.Errorf("episode %s has %d approvals by dev with the reason, want one: %+v", ep, n, ds)
		}
	}
}

// devPage is a tab on the devserver's page, with what its browser tests
// do on it.
type devPage struct {
	t   *testing.T
	tab *tab
	dev *allottest.Dev
}

// waitFor reloads nothing: it reads the live page until ok holds for its
// text (60 s).
func (p devPage) waitFor(what string, ok func(string) bool) string {
	p.t.Helper()
	deadline := allottest.Deadline(p.t, 60*time.Second)
	for {
		s := p.tab.text(p.t)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the page did not show %s by %v:\n%s", what, deadline, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// signIn types the devserver's token into the page's form.
func (p devPage) signIn() {
	p.t.Helper()
	data, err := os.ReadFile(p.dev.Info.ConsoleTokens)
	if err != nil {
		p.t.Fatal(err)
	}
	_, token, _ := strings.Cut(strings.TrimSpace(string(data)), ":")
	js, _ := json.Marshal(token)
	p.tab.evalRaw(p.t, `(function(){var f=document.querySelector('form[action="/login"]'); f.elements.token.value=`+string(js)+`; f.submit(); return true})()`)
	p.waitFor("the signed-in operator", func(s string) bool { return strings.Contains(s, "Signed in as dev") })
}

// TestBrowserRaisesToAdmitAllParked: with the demo's budget at one run's
// worth, two more runs park on it; "Needs a human" lists them before the
// approval, as they block more; the budget's "raise to admit all 2 parked"
// form, filled in with a reason and sent from the browser, records the
// raise by the signed-in operator, and the parked episodes go on by
// themselves to the approval gate (issue 41 §1).
func TestBrowserRaisesToAdmitAllParked(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the dev stack and a browser")
	}
	br := newBrowser(t)
	dir := t.TempDir()
	demo, err := os.ReadFile(filepath.Join("..", "..", "pipeline", "pipelines.toml"))
	if err != nil {
		t.Fatal(err)
	}
	const demoLimit = `limit     = { amount = 10000, currency = "USD" }`
	if !strings.Contains(string(demo), demoLimit) {
		t.Fatalf("the demo's budget no longer reads %s", demoLimit)
	}
	// One run reserves its two paid steps' max_cost at once: 5.00 USD.
	toml := strings.Replace(string(demo), demoLimit, `limit     = { amount = 500, currency = "USD" }`, 1)
	pipelinesFile := filepath.Join(dir, "pipelines.toml")
	if err := os.WriteFile(pipelinesFile, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	dev := allottest.StartDevWith(t, devstack.Config{DataDir: dir, Headless: true, ConsoleAddr: "127.0.0.1:0", Pipelines: pipelinesFile})
	ctx, cancel := allottest.Context(t, 3*time.Minute)
	defer cancel()
	set, err := pipeline.Load(pipelinesFile)
	if err != nil {
		t.Fatal(err)
	}
	runs := &operator.Runs{Client: allottest.DialDev(t, dev.Info), Pipelines: set, TaskQueue: workflows.TaskQueue}
	base := time.Now().UTC().Truncate(time.Second)
	var eps []string
	for i := range 3 {
		res, err := runs.Run(ctx, operator.RunInput{Pipeline: devstack.DemoPipeline, NominalTime: base.Add(time.Duration(i) * time.Second), Wait: true})
		if err != nil {
			t.Fatal(err)
		}
		eps = append(eps, res.Result.EpisodeID)
	}
	p := devPage{t: t, tab: br.open(t, dev.Info.Console), dev: dev}
	parked := "waits for room in its budget"
	waiting := "episode " + eps[0] + " of " + devstack.DemoPipeline + " waits for approval"
	page := p.waitFor("two episodes parked and one at the gate", func(s string) bool {
		return strings.Count(s, parked) == 2 && strings.Contains(s, waiting)
	})
	if strings.Index(page, parked) > strings.Index(page, waiting) {
		t.Fatalf("an approval is listed before the episodes parked on the budget:\n%s", page)
	}
	p.signIn()
	reason := "launch week: admit the parked runs"
	rjs, _ := json.Marshal(reason)
	if found := p.tab.evalRaw(t, `(function(){
  var forms = document.querySelectorAll('form.act');
  for (var i = 0; i < forms.length; i++) {
    var f = forms[i], b = f.querySelector('button[type=submit]');
    if (f.elements.act.value === 'set-limit' && b && b.textContent.indexOf('raise to admit all 2 parked') === 0) {
      f.elements.reason.value = `+string(rjs)+`;
      b.click();
      return true;
    }
  }
  return false;
})()`); found != "true" {
		t.Fatalf("the signed-in page has no raise-to-admit-all form for the two parked episodes:\n%s", p.tab.text(t))
	}
	p.waitFor("the parked episodes gone on to the gate", func(s string) bool {
		return !strings.Contains(s, parked) && strings.Contains(s, "3 episodes of "+devstack.DemoPipeline+" wait for approval")
	})
	led, err := ledger.OpenReadOnly(ctx, dev.Info.Ledger)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	b, _ := set.Budget(demoBudget)
	raises, err := led.BudgetRaises(ctx, demoBudget, b.PeriodOf(base))
	if err != nil || len(raises) != 1 || raises[0].By != "dev" || raises[0].Reason != reason || raises[0].Limit < 1500 {
		t.Fatalf("the ledger's raises: %+v, %v; want one by dev with the reason, to at least 15.00 USD", raises, err)
	}
}
