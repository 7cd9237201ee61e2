package console

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"allot"
	"allot/internal/forecast"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/internal/patience"
	"allot/pipeline"
	"allot/workflows"
)

// patientContext ends when a wait for what takes at most d on an idle
// machine gives up (package patience: ALLOT_TEST_PATIENCE stretches it).
func patientContext(t testing.TB, d time.Duration) (context.Context, context.CancelFunc) {
	return patience.Context(t, d)
}

const xss = "<script>alert(1)</script>"

// fixture is the budget fixture's ledger (three episodes holding 250 each
// in video-weekly, the first charged 200, the fourth parked on the
// budget), with a late period, a drift item and a paused vendor.
func fixture(t *testing.T) (ReadInput, []ledger.Episode, ledger.DeadlineRecord, ledger.DriftItem) {
	t.Helper()
	l, eps := ledgertest.BudgetLedger(t)
	ctx := context.Background()
	late, recorded, _, err := l.Led.JudgePeriod(ctx, ledger.PeriodJudgement{
		Pipeline: "weekly", Period: "2026-W31", Kind: allot.DeadlineLate, DueAt: ledgertest.BudgetMonday, Needed: 1,
		Cause: allot.CauseNoRun, Command: allot.RunCommand("weekly", ledgertest.BudgetMonday.Add(-7*24*time.Hour)), At: ledgertest.BudgetMonday,
	})
	if err != nil || !recorded {
		t.Fatalf("JudgePeriod = %v, recorded %v", err, recorded)
	}
	drift, _, err := l.Led.RecordDrift(ctx, ledger.DriftItem{Account: "acct", Vendor: "default", Line: "line-1", Class: allot.DriftUnrecorded,
		Amount: 250, Currency: "USD", Detail: "the bill charges a task the ledger does not know"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Led.PauseVendor(ctx, ledger.VendorPause{Vendor: "covers", Reason: "the covers bill is disputed", By: "test"}); err != nil {
		t.Fatal(err)
	}
	for _, o := range []ledger.RunOutcome{
		{Pipeline: "weekly", AllocationKey: "weekly/a", RunID: "r1", Outcome: allot.OutcomeAllocated, Reason: ledger.ReasonNewEpisode, EpisodeID: eps[0].ID, Period: "2026-W32", RecordedAt: ledgertest.BudgetMonday},
		{Pipeline: "weekly", AllocationKey: "weekly/b", RunID: "r2", Outcome: allot.OutcomeSkipped, Reason: allot.ReasonCapReached, Sequence: -1, RecordedAt: ledgertest.BudgetMonday.Add(time.Minute)},
		{Pipeline: "weekly", AllocationKey: "weekly/c", RunID: "r3", Outcome: allot.OutcomeFailed, Reason: "VendorDown", Sequence: -1, RecordedAt: ledgertest.BudgetMonday.Add(2 * time.Minute)},
	} {
		if _, err := l.Led.RecordRunOutcome(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	in := ReadInput{Ledger: l.Led, Pipelines: ledgertest.BudgetPipelines(t), Now: ledgertest.BudgetMonday.Add(3 * time.Hour),
		WebUI: "http://ui.test", Namespace: "ns"}
	return in, eps, late, drift
}

func needOf(t *testing.T, b Board, kind, title string) NeedItem {
	t.Helper()
	for _, it := range b.Needs {
		if it.Kind == kind && strings.Contains(it.Title, title) {
			return it
		}
	}
	t.Fatalf("no %s item titled %q in %+v", kind, title, b.Needs)
	return NeedItem{}
}

// The board shows each budget's period with the ledger's figures, and
// every kind of item that waits on a person with its exact command.
func TestBoardFromTheLedger(t *testing.T) {
	in, eps, late, drift := fixture(t)
	b, err := Read(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(b.Money, func(r BudgetRow) bool { return r.Budget == "video-weekly" })
	if i < 0 {
		t.Fatalf("no video-weekly row in %+v", b.Money)
	}
	row := b.Money[i]
	if row.Period.Period != "2026-W32" || row.Limit != 750 || row.Settled != 200 || row.Reserved != 500 || row.Free != 50 {
		t.Fatalf("video-weekly = %+v; want 2026-W32, 750 limit, 200 settled, 500 reserved, 50 free", row)
	}
	if parked := "weekly/" + eps[3].ID; !slices.Contains(row.Parked, parked) {
		t.Fatalf("video-weekly parked = %v, want %s", row.Parked, parked)
	}
	if got := row.Amount(row.Settled).String(); got != "2.00 USD" {
		t.Fatalf("settled prints %q", got)
	}

	ep := needOf(t, b, KindEpisode, eps[3].ID)
	if ep.Command != allot.ShowCommand("weekly", eps[3].ID) {
		t.Errorf("parked episode's command = %q, want %q", ep.Command, allot.ShowCommand("weekly", eps[3].ID))
	}
	if want := "http://ui.test/namespaces/ns/workflows/weekly%2Fepisode%2F" + eps[3].ID; ep.Link != want {
		t.Errorf("parked episode's link = %q, want %q", ep.Link, want)
	}
	if it := needOf(t, b, KindLate, "2026-W31"); it.Command != late.Command || it.Command == "" {
		t.Errorf("late period's command = %q, want the record's %q", it.Command, late.Command)
	}
	d := needOf(t, b, KindDrift, "line-1")
	if d.Command != allot.DriftAckCommand(drift.ID, "what was done") || d.Money == nil || *d.Money != (allot.Money{Amount: 250, Currency: "USD"}) {
		t.Errorf("drift item = %+v, want %q and 250 USD at stake", d, allot.DriftAckCommand(drift.ID, "what was done"))
	}
	if v := needOf(t, b, KindVendor, "covers"); v.Command != allot.VendorResumeCommand("covers") || v.Detail != "the covers bill is disputed" {
		t.Errorf("paused vendor = %+v, want %q", v, allot.VendorResumeCommand("covers"))
	}
	// Runs: newest first; a skip at the cap is normal, a failure is not.
	var runs []string
	for _, r := range b.Runs {
		runs = append(runs, fmt.Sprintf("%s/%s/%v", r.Outcome, r.Reason, r.Normal))
	}
	if got := strings.Join(runs, " "); got != "failed/VendorDown/false skipped/cap_reached/true allocated/new_episode/true" {
		t.Errorf("runs = %s", got)
	}
	if last := b.Runs[len(b.Runs)-1]; last.Link != "http://ui.test/namespaces/ns/workflows/weekly%2Fepisode%2F"+eps[0].ID {
		t.Errorf("an allocated run's link = %q", last.Link)
	}
	if want := "http://ui.test/namespaces/ns/workflows/weekly%2Fa"; b.Runs[2].RunLink != want {
		t.Errorf("a run's own link = %q, want %q", b.Runs[2].RunLink, want)
	}
	if slices.ContainsFunc(b.Needs, func(it NeedItem) bool { return strings.Contains(it.Title, eps[0].ID) }) {
		t.Errorf("an episode that waits on nobody is listed: %+v", b.Needs)
	}
}

// Names, reasons and errors render as text, never as HTML.
func TestPageRendersNamesAndReasonsAsText(t *testing.T) {
	in, eps, _, _ := fixture(t)
	ctx := context.Background()
	if _, err := in.Ledger.PauseVendor(ctx, ledger.VendorPause{Vendor: "default", Reason: xss}); err != nil {
		t.Fatal(err)
	}
	if err := in.Ledger.RecordEpisodeOutcome(ctx, "weekly", eps[1].ID, allot.OutcomeFailed, xss, in.Now); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewServer(in, nil))
	defer srv.Close()
	page := get(t, srv.URL+"/")
	// The pipeline file refuses such names; the template must escape
	// them anyway.
	var buf bytes.Buffer
	b := Board{Money: []BudgetRow{{}}, Needs: []NeedItem{{Kind: KindEpisode, Title: "episode of " + xss, Command: allot.ShowCommand(xss, "x")}}}
	b.Money[0].Budget, b.Money[0].Currency = xss, "USD"
	if err := pageTemplate.ExecuteTemplate(&buf, "board", view{Board: b}); err != nil {
		t.Fatal(err)
	}
	for name, html := range map[string]string{"the served page": page, "a board with such names": buf.String()} {
		if strings.Contains(html, xss) {
			t.Errorf("%s holds the raw %s", name, xss)
		}
		if !strings.Contains(html, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s does not show the escaped text:\n%s", name, html)
		}
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", url, resp.StatusCode, err, body)
	}
	return string(body)
}

// A ledger write reaches an open /events stream as an update event.
func TestEventsSendAnUpdateWhenTheLedgerChanges(t *testing.T) {
	in, _, _, _ := fixture(t)
	srv := httptest.NewServer(NewServer(in, nil))
	defer srv.Close()
	ctx, cancel := patientContext(t, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the stream ended before %s", what)
			}
			return l
		case <-ctx.Done():
			t.Fatalf("no %s before the deadline", what)
		}
		return ""
	}
	// The stream's opening comment: the marker it compares with is read.
	if l := next("the opening comment"); !strings.HasPrefix(l, ":") {
		t.Fatalf("first line %q, want the opening comment", l)
	}
	if _, err := in.Ledger.PauseVendor(context.Background(), ledger.VendorPause{Vendor: "default", Reason: "the page must see this"}); err != nil {
		t.Fatal(err)
	}
	for {
		if next("an update") == "event: update" {
			return
		}
	}
}

// Only loopback is served until operator tokens exist: another address is
// refused before anything listens.
func TestServeRefusesANonLoopbackAddress(t *testing.T) {
	in, _, _, _ := fixture(t)
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:8090", "[::]:0", "example.com:80"} {
		ready := false
		err := Serve(context.Background(), ServerConfig{Addr: addr, Read: in, Ready: func(string) { ready = true }})
		if err == nil || !strings.Contains(err.Error(), "--addr") || !strings.Contains(err.Error(), "not a loopback address") && !strings.Contains(err.Error(), "not host:port") {
			t.Errorf("Serve(%s) = %v; want a refusal naming --addr", addr, err)
		}
		if ready {
			t.Errorf("Serve(%s) listened", addr)
		}
	}
	ctx, cancel := patientContext(t, 30*time.Second)
	defer cancel()
	addrs := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ServerConfig{Addr: "127.0.0.1:0", Read: in, Ready: func(a string) { addrs <- a }})
	}()
	var addr string
	select {
	case addr = <-addrs:
	case err := <-done:
		t.Fatalf("Serve on loopback: %v", err)
	}
	if body := get(t, "http://"+addr+"/healthz"); strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz = %q", body)
	}
	if page := get(t, "http://"+addr+"/"); !strings.Contains(page, "video-weekly") {
		t.Fatalf("the page does not show the budget:\n%s", page)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve after its context ended: %v", err)
	}
}

// downClient is a Temporal client that never answers.
type downClient struct{ client.Client }

var errDown = errors.New("connection refused")

func (downClient) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return nil, errDown
}
func (downClient) ScheduleClient() client.ScheduleClient { return downSchedules{} }

type downSchedules struct{ client.ScheduleClient }

func (downSchedules) GetHandle(context.Context, string) client.ScheduleHandle { return downHandle{} }

type downHandle struct{ client.ScheduleHandle }

func (downHandle) Describe(context.Context) (*client.ScheduleDescription, error) { return nil, errDown }

// Temporal not answering costs the board its live parts only, said once:
// the money and the items are the ledger's, with the show command as the
// episodes' remedy.
func TestBoardWithoutTemporalSaysSoOnce(t *testing.T) {
	in, eps, _, _ := fixture(t)
	in.Temporal = downClient{}
	b, err := Read(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Problems) != 1 || !strings.Contains(b.Problems[0], "Temporal did not answer") {
		t.Fatalf("problems = %q; want one saying Temporal did not answer", b.Problems)
	}
	if it := needOf(t, b, KindEpisode, eps[3].ID); it.Command != allot.ShowCommand("weekly", eps[3].ID) {
		t.Fatalf("parked episode's command = %q", it.Command)
	}
	if len(b.Money) != 2 {
		t.Fatalf("money = %+v; want both budgets", b.Money)
	}
}

// parkedClient is a Temporal client whose Episode workflows are all
// parked on step video, with two remedies, and whose Schedules are absent.
type parkedClient struct{ client.Client }

func (parkedClient) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: "run"},
		Status:    enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
	}}, nil
}

func (parkedClient) QueryWorkflow(_ context.Context, id, _, query string, _ ...any) (converter.EncodedValue, error) {
	if query != workflows.StateQuery {
		return nil, fmt.Errorf("query %s of %s", query, id)
	}
	p := strings.TrimPrefix(id, "weekly/episode/")
	st := workflows.EpisodeState{Stage: allot.StageNeedsAttention, Attention: &workflows.Attention{
		Step: "video", ErrorType: allot.BudgetExhausted, Reason: "video-weekly has no room",
		Remedies: []string{allot.BudgetRaiseCommand("video-weekly", "2026-W32", 1000, "why"), allot.ShowCommand("weekly", p)},
	}}
	payloads, err := converter.GetDefaultDataConverter().ToPayloads(st)
	if err != nil {
		return nil, err
	}
	return client.NewValue(payloads), nil
}

func (parkedClient) ScheduleClient() client.ScheduleClient { return absentSchedules{} }

type absentSchedules struct{ client.ScheduleClient }

func (absentSchedules) GetHandle(context.Context, string) client.ScheduleHandle {
	return absentHandle{}
}

type absentHandle struct{ client.ScheduleHandle }

func (absentHandle) Describe(context.Context) (*client.ScheduleDescription, error) {
	return nil, serviceerror.NewNotFound("no schedule")
}

// With Temporal at hand, a parked episode's item is its workflow's: the
// attention's reason and its first remedy; its one figure, for an episode
// parked on its budget, is how far the limit must rise for it to go on
// (what it asks, 250, less the 50 free), not its step's price "at stake"
// beside an "asked" of another amount.
func TestBoardTakesTheRemedyFromTheWorkflow(t *testing.T) {
	in, eps, _, _ := fixture(t)
	in.Temporal = parkedClient{}
	b, err := Read(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Problems) != 0 {
		t.Fatalf("problems = %q", b.Problems)
	}
	it := needOf(t, b, KindEpisode, eps[3].ID)
	if want := allot.BudgetRaiseCommand("video-weekly", "2026-W32", 1000, "why"); it.Command != want {
		t.Errorf("command = %q, want the first remedy %q", it.Command, want)
	}
	if it.Money == nil || *it.Money != (allot.Money{Amount: 200, Currency: "USD"}) || it.MoneyLabel != "short in budget video-weekly 2026-W32" || !strings.Contains(it.Detail, "video-weekly has no room") {
		t.Errorf("item = %+v; want 2.00 USD short in budget video-weekly 2026-W32 and the attention's reason", it)
	}
}

// A budget's bar is drawn to its limit, whatever the forecast: at 0, 50,
// 100 and 600 % of a limit of 700 the limit mark stays at BarLimitX; what
// the limit admits fills up to its share; what it would refuse follows
// past the mark, cut at BarWidth. (TestBrowserDrawsEachBudgetToItsLimit
// checks the same in Chromium.)
func TestBarIsDrawnToTheLimit(t *testing.T) {
	row := func(settled, admitted, refused int64) BudgetRow {
		return BudgetRow{Period: forecast.Period{Limit: 700, Settled: settled, AdmittedAmount: admitted, RefusedAmount: refused,
			Upcoming: admitted + refused, Forecast: settled + admitted + refused}}
	}
	for name, c := range map[string]struct {
		row                          BudgetRow
		settledW, upcomingW, refused float64
		clipped                      bool
	}{
		"0 %":   {row(0, 0, 0), 0, 0, 0, false},
		"50 %":  {row(150, 200, 0), 400 * 150 / 700.0, 400 * 200 / 700.0, 0, false},
		"100 %": {row(0, 700, 0), 0, 400, 0, false},
		"600 %": {row(0, 600, 3600), 0, 400 * 600 / 700.0, BarWidth - 400*600/700.0, true},
	} {
		b := c.row.Bar()
		near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
		if b.LimitX != BarLimitX || !near(b.SettledW, c.settledW) || !near(b.UpcomingW, c.upcomingW) || !near(b.RefusedW, c.refused) || b.Clipped != c.clipped ||
			!near(b.UpcomingX, b.SettledW) || !near(b.RefusedX, b.UpcomingX+b.UpcomingW) {
			t.Errorf("%s: %+v; want the limit at %v, settled %v, upcoming %v, refused %v (clipped %t), one after the other", name, b, BarLimitX, c.settledW, c.upcomingW, c.refused, c.clipped)
		}
	}
}

// "Needs a human" lists what blocks most first: a held vendor, a late
// period, a period warned that it may be late (from the moment the warning
// is recorded), an episode parked on its budget, one that needs attention, then
// the approvals, the longest waiting first, then drift; each says how
// long it has waited. Before, the list came in the order of its sources,
// and a paused vendor sat below the approvals.
func TestNeedsAreOrderedByWhatTheyBlock(t *testing.T) {
	in, eps, _, _ := fixture(t)
	ctx := context.Background()
	for _, o := range []struct {
		ep              ledger.Episode
		outcome, reason string
		at              time.Duration
	}{
		{eps[2], string(allot.OutcomeWaitingApproval), "", 2 * time.Hour},
		{eps[1], string(allot.OutcomeNeedsAttention), allot.OutcomeUnknown, time.Hour},
		{eps[0], string(allot.OutcomeWaitingApproval), "", 30 * time.Minute},
	} {
		if err := in.Ledger.RecordEpisodeOutcome(ctx, "weekly", o.ep.ID, allot.Outcome(o.outcome), o.reason, ledgertest.BudgetMonday.Add(o.at)); err != nil {
			t.Fatal(err)
		}
	}
	// W33's warning, recorded at 01:00, shows at once, below the late
	// period.
	if _, recorded, _, err := in.Ledger.JudgePeriod(ctx, ledger.PeriodJudgement{Pipeline: "weekly", Period: "2026-W33", Kind: allot.DeadlineWarning,
		DueAt: ledgertest.BudgetMonday.Add(7 * 24 * time.Hour), Needed: 1, Cause: allot.CauseNoRun, At: ledgertest.BudgetMonday.Add(time.Hour)}); err != nil || !recorded {
		t.Fatalf("JudgePeriod = %v, recorded %v", err, recorded)
	}
	b, err := Read(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range b.Needs {
		got = append(got, it.Title)
	}
	want := []string{
		"vendor covers is paused",
		"period 2026-W31 of weekly is late",
		"period 2026-W33 of weekly may be late: due 2026-08-10T02:00:00Z",
		"episode " + eps[3].ID + " of weekly waits for room in its budget",
		"episode " + eps[1].ID + " of weekly needs a decision",
		// Two approvals of one pipeline are one item, as old as its
		// oldest (00:30), holding both oldest first.
		"2 episodes of weekly wait for approval",
		"drift",
	}
	if len(got) != len(want) {
		t.Fatalf("needs = %q, want %d items in the order %q", got, len(want), want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("need %d is %q, want %q first (all: %q)", i, got[i], want[i], got)
		}
	}
	group := b.Needs[5]
	var inGroup []string
	for _, it := range group.Group {
		inGroup = append(inGroup, it.EpisodeID)
	}
	if want := []string{eps[0].ID, eps[2].ID}; !reflect.DeepEqual(inGroup, want) {
		t.Errorf("the approvals group holds %q, want %q, oldest first", inGroup, want)
	}
	if group.Age != "2 h 30 min" {
		t.Errorf("the approvals group has waited %q, want its oldest's 2 h 30 min", group.Age)
	}
	ages := map[string]string{"period 2026-W31": "3 h", "period 2026-W33": "2 h", eps[0].ID: "2 h 30 min", eps[1].ID: "2 h", eps[2].ID: "1 h"}
	for _, it := range append(b.Needs, group.Group...) {
		for key, want := range ages {
			if strings.Contains(it.Title, key) && it.Age != want {
				t.Errorf("%s has waited %q, want %q", it.Title, it.Age, want)
			}
		}
	}
}

func TestAgeReadsAsAPersonSaysIt(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "under a minute", 25 * time.Minute: "25 min", 3 * time.Hour: "3 h", 3*time.Hour + 20*time.Minute: "3 h 20 min",
		24 * time.Hour: "1 day", 52 * time.Hour: "2 days 4 h",
	} {
		if got := age(d); got != want {
			t.Errorf("age(%v) = %q, want %q", d, got, want)
		}
	}
}

// A list the page cuts says so and says where the rest is: a Schedule
// every 10 minutes holds 1,008 times in the next week; the page shows the
// first 20, says "the first 20 of 1008 times", and links to the Schedule
// in the Web UI and prints its describe command. Before, the list stopped
// at 20 rows without a word.
func TestScheduledListSaysWhatItLeavesOut(t *testing.T) {
	set, err := pipeline.Parse([]byte(`
[[pipeline]]
name   = "often"
period = "day"
  [pipeline.schedule]
  cron = "*/10 * * * *"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
`), "often")
	if err != nil {
		t.Fatal(err)
	}
	in := ReadInput{Ledger: ledgertest.New(t).Led, Pipelines: set, Now: time.Date(2026, 8, 3, 0, 0, 0, 0, time.UTC), WebUI: "http://ui.test", Namespace: "ns"}
	b, err := Read(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Next) != upcomingShown || b.NextShown != upcomingShown || b.NextTotal != 7*24*6 {
		t.Fatalf("next = %d rows, %d shown of %d; want %d of %d", len(b.Next), b.NextShown, b.NextTotal, upcomingShown, 7*24*6)
	}
	want := ScheduleRest{Pipeline: "often", Times: 7 * 24 * 6, Link: "http://ui.test/namespaces/ns/schedules/" + url.PathEscape(allot.ScheduleID("often")),
		Command: allot.ScheduleDescribeCommand("often")}
	if len(b.NextRest) != 1 || b.NextRest[0] != want {
		t.Fatalf("where the rest is = %+v, want %+v", b.NextRest, want)
	}
	var page bytes.Buffer
	if err := pageTemplate.ExecuteTemplate(&page, "board", view{Board: b}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), "Scheduled, next 7 days (the first 20 of 1008 times)") || !strings.Contains(page.String(), want.Command) {
		t.Errorf("the page does not say what it leaves out:\n%s", page.String())
	}
}

// The page says outcomes and reasons in words, the ledger's term kept in
// parentheses; a term without words is shown as it is.
func TestPageSaysOutcomesInWords(t *testing.T) {
	if got := sayEpisode(allot.Episode{Outcome: string(allot.OutcomeNeedsAttention), OutcomeReason: allot.BudgetExhausted}); got != "waits for room in its budget" {
		t.Errorf("a budget-parked episode = %q", got)
	}
	if got := sayOutcome(string(allot.OutcomeWaitingApproval)); got != "waits for approval" {
		t.Errorf("waiting_approval = %q", got)
	}
	if got := sayReason(allot.OutcomeUnknown); got != "a paid request may have reached the vendor, and the vendor cannot say (OutcomeUnknown)" {
		t.Errorf("OutcomeUnknown = %q", got)
	}
	if got := sayReason("SomethingNew"); got != "SomethingNew" {
		t.Errorf("a reason without words = %q", got)
	}
}

// The resolve form offers exactly the exits the command table allows the
// parked step, for every row of it: a task never sent (planned) offers
// neither resubmit nor adopt; an unknown outcome offers all four. Before,
// every form offered all four.
func TestResolveFormOffersTheExitsThatApply(t *testing.T) {
	e := ledger.Episode{Pipeline: "weekly", ID: "2026-W32-0"}
	exitOf := map[allot.Action]string{allot.ActionRetry: ExitRetry, allot.ActionResubmit: ExitResubmit, allot.ActionAbandon: ExitAbandon, allot.ActionAdopt: ExitAdopt}
	for _, rule := range allot.PaidCommandTable {
		var want []string
		for _, exit := range []string{ExitRetry, ExitResubmit, ExitAbandon, ExitAdopt} {
			for _, a := range rule.Allowed {
				if exitOf[a] == exit {
					want = append(want, exit)
				}
			}
		}
		got := resolveExits(e, "video", workflows.Remedies(e.Pipeline, e.ID, "video", rule.State, rule.Attention))
		if !slices.Equal(got, want) {
			t.Errorf("%s/%s: the form offers %v, want %v", rule.State, rule.Attention, got, want)
		}
	}
	planned := resolveExits(e, "video", workflows.Remedies(e.Pipeline, e.ID, "video", allot.PaidPlanned, allot.BudgetExhausted))
	if slices.Contains(planned, ExitResubmit) || slices.Contains(planned, ExitAdopt) || !slices.Contains(planned, ExitAbandon) {
		t.Fatalf("a task never sent offers %v", planned)
	}
}

// The page filters what waits on a person by pipeline: ?pipeline=daily
// keeps daily's late period and what blocks every pipeline (a held
// vendor), and leaves weekly's episodes and late period out; an unknown
// pipeline is refused with the names to choose from, and the whole list
// is shown.
func TestNeedsFilterByPipeline(t *testing.T) {
	in, eps, _, _ := fixture(t)
	ctx := context.Background()
	if _, recorded, _, err := in.Ledger.JudgePeriod(ctx, ledger.PeriodJudgement{Pipeline: "daily", Period: "2026-08-02", Kind: allot.DeadlineLate,
		DueAt: ledgertest.BudgetMonday, Needed: 1, Cause: allot.CauseNoRun, At: ledgertest.BudgetMonday}); err != nil || !recorded {
		t.Fatalf("JudgePeriod = %v, recorded %v", err, recorded)
	}
	in.Pipeline = "daily"
	b, err := Read(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	var titles []string
	for _, it := range b.Needs {
		titles = append(titles, it.Title)
		if it.Pipeline != "" && it.Pipeline != "daily" {
			t.Errorf("the filter to daily shows %q of %s", it.Title, it.Pipeline)
		}
	}
	if !slices.ContainsFunc(titles, func(s string) bool { return strings.HasPrefix(s, "period 2026-08-02 of daily is late") }) ||
		!slices.ContainsFunc(titles, func(s string) bool { return strings.HasPrefix(s, "vendor covers is paused") }) ||
		slices.ContainsFunc(titles, func(s string) bool { return strings.Contains(s, eps[3].ID) }) {
		t.Fatalf("filtered to daily: %q; want daily's late period and the held vendor, not weekly's episode", titles)
	}

	in.Pipeline = ""
	srv := httptest.NewServer(NewServer(in, nil))
	t.Cleanup(srv.Close)
	for query, want := range map[string]int{"?pipeline=daily": http.StatusOK, "?pipeline=nosuch": http.StatusNotFound} {
		resp, err := http.Get(srv.URL + "/" + query)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page := string(body)
		switch {
		case resp.StatusCode != want:
			t.Errorf("GET /%s = %d, want %d", query, resp.StatusCode, want)
		case want == http.StatusOK && (!strings.Contains(page, "Needs a human (") || !strings.Contains(page, ", pipeline daily)") || strings.Contains(page, "episode "+eps[3].ID)):
			t.Errorf("GET /%s does not show daily's list only:\n%s", query, page)
		case want == http.StatusNotFound && (!strings.Contains(page, "The page has no pipeline &#34;nosuch&#34; to show: choose one of daily, weekly, or all.") || !strings.Contains(page, "episode "+eps[3].ID)):
			t.Errorf("GET /%s does not refuse the filter and show everything:\n%s", query, page)
		}
	}
}

// Spend the budget's records leave out is on the page beside its figures
// (issue 41 §1: 110 USD spent before a budget existed vanished from the
// page while check counted it), split into imported, acknowledged and
// open, with the command that acknowledges the open ones.
func TestPageShowsSpendOutsideTheBudgetsRecords(t *testing.T) {
	in, _, _, _ := fixture(t)
	fixture := &ledgertest.Ledger{T: t, Led: in.Ledger}
	early := fixture.ChargeWithoutReservation("weekly", ledgertest.BudgetMonday.Add(10*time.Hour), "vt_early", 6000)
	fixture.ChargeWithoutReservation("weekly", ledgertest.BudgetMonday.Add(11*time.Hour), "vt_late", 5000)
	if _, err := in.Ledger.AcknowledgeCharges(context.Background(), []ledger.ChargeAck{{Budget: "video-weekly", Period: "2026-W32",
		PaidTaskRef: ledger.PaidTaskRef{Pipeline: "weekly", EpisodeID: early.ID, Step: "video"}, Amount: 6000, Currency: "USD", By: "carol", Reason: "before the budget"}}, in.Now); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewServer(in, nil))
	defer srv.Close()
	page := get(t, srv.URL+"/")
	for _, want := range []string{
		"Outside its records: 110.00 USD charged to 2 task(s) it covers that hold no entry in it",
		"0.00 USD imported (charged before allot ran them), 60.00 USD acknowledged, 50.00 USD open",
		"check flags the 1 open one(s)",
		strings.NewReplacer("'", "&#39;", `"`, "&#34;").Replace(allot.BudgetAcknowledgeCommand("video-weekly", "2026-W32", "spent before the budget covered the step")),
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// The recent runs say how many they show when the week holds more, and
// link to the rest (issue 41 §1: every list says how much it shows).
func TestRecentRunsSayHowManyTheyShow(t *testing.T) {
	in, _, _, _ := fixture(t)
	ctx := context.Background()
	for i := range runsShown + 1 {
		o := ledger.RunOutcome{Pipeline: "weekly", AllocationKey: fmt.Sprintf("weekly/more-%d", i), RunID: "r", Outcome: allot.OutcomeSkipped,
			Reason: allot.ReasonCapReached, Sequence: -1, RecordedAt: in.Now.Add(-time.Duration(i+1) * time.Minute)}
		if _, err := in.Ledger.RecordRunOutcome(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(NewServer(in, nil))
	defer srv.Close()
	page := get(t, srv.URL+"/")
	for _, want := range []string{fmt.Sprintf("Recent runs (last 7 days: the newest %d of more)", runsShown), `<a href="http://ui.test/namespaces/ns/workflows">the Web UI's list of every run</a>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// A budget that holds for its scheduled runs shows what it holds and what
// is left free for manual runs, backfills and retries (issue 41 §2); the
// free figure is the ledger's, after the hold.
func TestPageShowsWhatIsHeldForTheSchedule(t *testing.T) {
	in, _, _, _ := fixture(t)
	ctx := context.Background()
	b, _ := in.Pipelines.Budget("default-monthly")
	runs := []ledger.ScheduledRun{
		{Pipeline: "weekly", At: ledgertest.BudgetMonday.Add(24 * time.Hour), Amount: 100},
		{Pipeline: "weekly", At: ledgertest.BudgetMonday.Add(48 * time.Hour), Amount: 100},
	}
	bp, err := in.Ledger.HoldScheduled(ctx, ledger.HoldInput{Budget: ledger.LimitOf(b), Period: "2026-08", Runs: runs, At: in.Now})
	if err != nil {
		t.Fatal(err)
	}
	if bp.HeldForSchedule != 200 || bp.HeldRuns != 2 {
		t.Fatalf("the ledger holds %d for %d runs, want 200 for 2", bp.HeldForSchedule, bp.HeldRuns)
	}
	srv := httptest.NewServer(NewServer(in, nil))
	defer srv.Close()
	page := get(t, srv.URL+"/")
	m := func(a int64) string { return allot.Money{Amount: a, Currency: "USD"}.String() }
	for _, want := range []string{
		"<th>held for the schedule</th><td>" + m(200) + " <small>(2 runs)</small>",
		"<th>free</th><td>" + m(bp.Free) + "</td>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}
