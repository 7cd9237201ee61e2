// Package console is the operator page for the people who pay
// (docs/design.md, "The operator page"): in one look, what ran, what it
// cost, what is left to spend in each budget, what the period will cost,
// and everything that waits on a person with the command that resolves
// it. This stage is read-only: where an action will be, the page prints
// the CLI command. It keeps no state of its own: every request reads the
// ledger (and Temporal, when given), so several instances may serve one
// ledger.
package console

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"allot"
	"allot/internal/forecast"
	"allot/internal/ledger"
	"allot/internal/report"
	"allot/pipeline"
)

// Page sizes: the page shows the newest or first of each list, and says
// when there are more (the CLI lists them all).
const (
	runsShown     = 50
	waitingShown  = 100
	driftShown    = 100
	upcomingShown = 20
	// runsWindow and upcomingWindow are how far back the runs and how far
	// ahead the scheduled times go.
	runsWindow     = 7 * 24 * time.Hour
	upcomingWindow = 7 * 24 * time.Hour
)

// ReadInput is what the page reads.
type ReadInput struct {
	Ledger    *ledger.Ledger
	Pipelines *pipeline.Set
	// Temporal may be nil: the schedules are then the pipeline file's
	// (never paused), and the episodes' remedies the show command.
	Temporal client.Client
	// Namespace is the Temporal namespace of the links ("" = default).
	Namespace string
	// Now is when the board is read; zero is the wall clock.
	Now time.Time
	// WebUI is the base URL of the Temporal Web UI; "" shows no links.
	WebUI string
	// Pipeline, when set, keeps what waits on a person to that pipeline's
	// (and what blocks every pipeline, such as a held vendor).
	Pipeline string
}

// Board is everything the page shows, read at Now.
type Board struct {
	Now time.Time
	// Pipeline is the filter of what waits on a person ("" none);
	// PipelineNames are the pipelines to filter by.
	Pipeline      string
	PipelineNames []string
	Money         []BudgetRow
	Needs         []NeedItem
	Runs          []RunRow
	More          bool // more runs in the window than shown
	// RunsLink is the Web UI's list of every run ("" without a Web UI),
	// where the runs not shown are.
	RunsLink string
	Next     []UpcomingRun
	// NextTotal is how many scheduled times the next week holds, NextShown
	// how many of them Next shows (the first; Next also has a row per
	// paused Schedule), NextRest where each pipeline's are all listed.
	NextTotal, NextShown int
	NextRest             []ScheduleRest
	Vendors              []report.VendorView
	// Schedules are the pipelines' Schedules, paused or not.
	Schedules []ScheduleRow
	// Spend is the recorded costs per vendor and currency over SpendDays
	// (the chart's days, oldest first), SpendCharts the same a chart per
	// currency.
	Spend       []SpendSeries
	SpendDays   []string
	SpendCharts []SpendChart
	// Unbudgeted is what the paid steps no budget covers settled in
	// UnbudgetedMonth (the calendar month of Now in UTC, "2006-01"), per
	// pipeline and vendor.
	Unbudgeted      []UnbudgetedRow
	UnbudgetedMonth string
	// Problems are what could not be read (Temporal unreachable, say):
	// the rest of the board is still shown, with this said above it.
	Problems []string
}

// BudgetRow is one budget's current period: the forecast's figures
// (settled and reserved from the ledger, upcoming from the schedules),
// its alert thresholds and the episodes parked on it.
type BudgetRow struct {
	forecast.Period
	// Alerts are the thresholds as amounts of the limit.
	Alerts []allot.Money
	// Free is what the limit leaves after settled, reserved and held for
	// the schedule (never below zero): what manual runs, backfills and
	// retries may spend.
	Free int64
	// Holds: the budget holds for its scheduled runs (hold_scheduled);
	// HeldForSchedule is what it holds for the HeldRuns still due.
	Holds           bool
	HeldForSchedule int64
	HeldRuns        int
	Parked          []string
	// ParkedAsk is what the parked episodes ask of the period together
	// (each what one run reserves at most: all its covered steps at once),
	// RaiseAll how far the limit must rise to admit them all (never below
	// zero), and AdmitAllLimit the limit that does.
	ParkedAsk, RaiseAll, AdmitAllLimit int64
	// Outside is the spend the period's records leave out
	// (report.OutsideRecords), shown beside its figures, not lost.
	Outside *report.OutsideSpend
}

// ParkedLimitInput is AdmitAllLimit as the page's limit box takes it:
// major units, no currency ("12.50").
func (r BudgetRow) ParkedLimitInput() string {
	return allot.Money{Amount: r.AdmitAllLimit, Currency: r.Currency}.Decimal()
}

// shortOf is how far the limit must rise for one parked episode of
// pipeline p to go on: what it asks less what the period has free (never
// below zero); ok false when the budget does not cover p.
func (r BudgetRow) shortOf(b pipeline.Budget, p *pipeline.Pipeline) (int64, bool) {
	ask, _, covers, err := b.PerRun(p)
	if err != nil || !covers {
		return 0, false
	}
	return max(ask-r.Free, 0), true
}

// Amount is a figure of the row as money in its currency.
func (r BudgetRow) Amount(minor int64) allot.Money {
	return allot.Money{Amount: minor, Currency: r.Currency}
}

// NeedItem is one thing that waits on a person.
type NeedItem struct {
	Kind   string
	Title  string
	Detail string
	// Money is what is at stake, when known; MoneyLabel says what it is
	// when it is not ("" reads "at stake").
	Money      *allot.Money
	MoneyLabel string
	// Command is the complete CLI command that resolves it (or shows
	// what to do), as the CLI prints it.
	Command string
	// Link is the Temporal Web UI page of its workflow, when there is one.
	Link string
	// Acts are what a signed-in operator can do about it on the page
	// (the same as Command does).
	Acts []Act
	// Pipeline is the pipeline it belongs to ("": it may block any),
	// EpisodeID the episode it is about, if one.
	Pipeline  string
	EpisodeID string
	// Since is when it began to wait (zero: not known), Age how long ago
	// that was when the board was read, in words.
	Since time.Time
	Age   string
	// Group are the items it stands for, when it groups several (the
	// approvals of one pipeline), each with its own acts.
	Group []NeedItem
	// rank is how much it blocks: the board lists the items by it
	// (needOrder), then the longest waiting first.
	rank int
}

// needOrder ranks what waits on a person by how much it blocks: a held
// vendor stops every paid step it serves; a late period is a promise
// broken already; an episode parked on its budget waits for money, one
// that needs attention for a decision, one that waits for its vendor on
// the vendor above; an approval holds one episode; a drift item blocks no
// work (its money is on the bill already).
const (
	rankVendor = iota
	rankLate
	rankWarning
	rankBudget
	rankAttention
	rankWaitingVendor
	rankApproval
	rankDrift
)

// Kinds of NeedItem.
const (
	KindEpisode = "episode"
	KindLate    = "late_period"
	KindDrift   = "drift"
	KindVendor  = "vendor"
	// KindApprovals groups the episodes of one pipeline that wait for
	// approval, when more than one does.
	KindApprovals = "approvals"
)

// RunRow is one ScheduledRun's outcome; Normal says it is the normal
// course of a schedule (a skip at the cap is not a failure).
type RunRow struct {
	ledger.RunOutcome
	Normal bool
	// RunLink is the Web UI page of the ScheduledRun (its workflow ID is
	// its allocation key), Link its episode's.
	RunLink string
	Link    string
}

// UpcomingRun is a scheduled time in the next week and its price: the
// sum of the max_cost of the pipeline's steps (what one run reserves at
// most), by currency; Quoted names the paid steps priced by a quote only.
type UpcomingRun struct {
	Pipeline string
	At       time.Time
	Price    []allot.Money
	Quoted   []string
	// Paused: the Schedule is paused and starts none of its times.
	Paused bool
}

// ScheduleRow is a pipeline's Schedule as the board read it.
type ScheduleRow struct {
	Pipeline string
	Paused   bool
}

// reader is one board's reading: the input and what the sources share.
type reader struct {
	in      ReadInput
	now     time.Time
	vendors []report.VendorView
	board   *Board
	// sched holds each pipeline's Schedule once read; temporalDown: a
	// call to Temporal failed, and the board reads no more from it.
	sched        map[string]forecast.Schedule
	temporalDown bool
}

// needSource lists one kind of NeedItem. Adding a kind is adding one to
// needSources.
type needSource func(ctx context.Context, r *reader) ([]NeedItem, error)

var needSources = []needSource{waitingEpisodes, latePeriods, warnedPeriods, driftItems, heldVendors}

// Read reads the board.
func Read(ctx context.Context, in ReadInput) (Board, error) {
	if in.Ledger == nil || in.Pipelines == nil {
		return Board{}, fmt.Errorf("console: a board needs a ledger and a pipeline set")
	}
	now := in.Now
	if now.IsZero() {
		now = time.Now()
	}
	b := Board{Now: now, Pipeline: in.Pipeline, PipelineNames: in.Pipelines.Names()}
	r := &reader{in: in, now: now, board: &b, sched: map[string]forecast.Schedule{}}
	var err error
	if r.vendors, err = report.ListVendors(ctx, in.Ledger, in.Pipelines); err != nil {
		return Board{}, err
	}
	b.Vendors = r.vendors
	if b.Money, err = r.money(ctx); err != nil {
		return Board{}, err
	}
	for _, src := range needSources {
		items, err := src(ctx, r)
		if err != nil {
			return Board{}, err
		}
		b.Needs = append(b.Needs, items...)
	}
	if in.Pipeline != "" {
		b.Needs = slices.DeleteFunc(b.Needs, func(it NeedItem) bool { return it.Pipeline != "" && it.Pipeline != in.Pipeline })
	}
	orderNeeds(b.Needs, now)
	b.RunsLink = r.webUI("workflows", "")
	if b.Runs, b.More, err = r.runs(ctx); err != nil {
		return Board{}, err
	}
	if b.Next, err = r.upcoming(ctx); err != nil {
		return Board{}, err
	}
	if err := r.spend(ctx); err != nil {
		return Board{}, err
	}
	return b, nil
}

// schedules reads each pipeline's Schedule once a board: live through
// Temporal when a client is given, else (or when Temporal does not
// answer, which the board then says once) the pipeline file's.
func (r *reader) schedules() func(ctx context.Context, name string) (forecast.Schedule, error) {
	var live func(ctx context.Context, name string) (forecast.Schedule, error)
	if r.in.Temporal != nil {
		live = forecast.TemporalSchedules(r.in.Temporal, r.in.Pipelines)
	}
	return func(ctx context.Context, name string) (forecast.Schedule, error) {
		if s, ok := r.sched[name]; ok {
			return s, nil
		}
		var (
			s   forecast.Schedule
			err error
		)
		if live != nil && !r.temporalDown {
			if s, err = live(ctx, name); err != nil {
				r.temporalFailed(err, "the pipeline file's schedules are shown instead")
			}
		}
		if live == nil || r.temporalDown {
			if s, err = fileSchedule(r.in.Pipelines, name); err != nil {
				return forecast.Schedule{}, err
			}
		}
		r.sched[name] = s
		return s, nil
	}
}

// temporalFailed says once that Temporal did not answer, and reads
// nothing more from it for this board.
func (r *reader) temporalFailed(err error, instead string) {
	if !r.temporalDown {
		r.board.Problems = append(r.board.Problems, fmt.Sprintf("Temporal did not answer (%v): %s", err, instead))
	}
	r.temporalDown = true
}

func fileSchedule(set *pipeline.Set, name string) (forecast.Schedule, error) {
	p, err := set.Get(name)
	if err != nil || p.Schedule == nil {
		return forecast.Schedule{}, err
	}
	spec, err := p.Schedule.Spec()
	if err != nil {
		return forecast.Schedule{}, fmt.Errorf("pipeline %s: %w", name, err)
	}
	return forecast.Schedule{Found: true, Spec: spec, Zone: p.TimeZone}, nil
}

// money is each budget's current period, forecast.
func (r *reader) money(ctx context.Context) ([]BudgetRow, error) {
	periods, err := forecast.Budgets(ctx, forecast.Input{Ledger: r.in.Ledger, Pipelines: r.in.Pipelines, Schedule: r.schedules(), Now: r.now})
	if err != nil {
		return nil, err
	}
	var out []BudgetRow
	for _, p := range periods {
		b, ok := r.in.Pipelines.Budget(p.Budget)
		if !ok {
			continue
		}
		view, err := report.BudgetPeriod(ctx, r.in.Ledger, r.in.Pipelines, b, p.Period)
		if err != nil {
			return nil, err
		}
		row := BudgetRow{Period: p, Parked: view.Parked, Free: max(view.Free, 0), Outside: view.Outside,
			Holds: b.HoldScheduled, HeldForSchedule: view.HeldForSchedule, HeldRuns: view.HeldRuns}
		if err := row.admitAll(r.in.Pipelines, b); err != nil {
			return nil, err
		}
		for _, bp := range b.AlertBasisPoints() {
			row.Alerts = append(row.Alerts, allot.Money{Amount: p.Limit * int64(bp) / 10000, Currency: p.Currency})
		}
		out = append(out, row)
	}
	return out, nil
}

// admitAll works out what the parked episodes ask of the row's period
// and the limit that admits them all (see BudgetRow.ParkedAsk).
func (row *BudgetRow) admitAll(set *pipeline.Set, b pipeline.Budget) error {
	for _, key := range row.Parked {
		name, _, _ := strings.Cut(key, "/")
		p, err := set.Get(name)
		if err != nil {
			continue // a pipeline the file no longer has
		}
		ask, _, covers, err := b.PerRun(p)
		if err != nil {
			return err
		}
		if !covers {
			continue
		}
		if row.ParkedAsk, err = allot.AddAmount(row.ParkedAsk, ask); err != nil {
			return fmt.Errorf("budget %s period %s: what its parked episodes ask: %w", b.Name, row.Period.Period, err)
		}
	}
	if len(row.Parked) == 0 {
		return nil
	}
	row.RaiseAll = max(row.ParkedAsk-row.Free, 0)
	var err error
	if row.AdmitAllLimit, err = allot.AddAmount(row.Limit, row.RaiseAll); err != nil {
		return fmt.Errorf("budget %s period %s: the limit that admits its parked episodes: %w", b.Name, row.Period.Period, err)
	}
	return nil
}

// link is the Web UI page of a workflow, or "" without a Web UI.
func (r *reader) link(workflowID string) string { return r.webUI("workflows", workflowID) }

// webUI is the Web UI page of an object of kind (workflows, schedules) in
// the page's namespace, or their list for id "", or "" without a Web UI.
func (r *reader) webUI(kind, id string) string {
	if r.in.WebUI == "" {
		return ""
	}
	ns := r.in.Namespace
	if ns == "" {
		ns = client.DefaultNamespace
	}
	page := r.in.WebUI + "/namespaces/" + url.PathEscape(ns) + "/" + kind
	if id != "" {
		page += "/" + url.PathEscape(id)
	}
	return page
}

// waitingEpisodes: every episode parked or waiting, with its workflow's
// remedy when Temporal is at hand (else the show command, which prints
// it).
func waitingEpisodes(ctx context.Context, r *reader) ([]NeedItem, error) {
	eps, err := r.in.Ledger.EpisodesWaiting(ctx, waitingShown)
	if err != nil {
		return nil, err
	}
	var out []NeedItem
	for _, e := range eps {
		it := NeedItem{
			Kind:      KindEpisode,
			Title:     fmt.Sprintf("episode %s of %s %s", e.ID, e.Pipeline, sayEpisode(e)),
			Detail:    sayReason(e.OutcomeReason),
			Command:   allot.ShowCommand(e.Pipeline, e.ID),
			Link:      r.link(allot.EpisodeWorkflowID(e.Pipeline, e.ID)),
			Since:     e.OutcomeAt,
			Pipeline:  e.Pipeline,
			EpisodeID: e.ID,
			rank:      episodeRank(e),
		}
		if allot.Outcome(e.Outcome) == allot.OutcomeWaitingApproval {
			it.Command = allot.ApproveCommand(e.Pipeline, e.ID)
			it.Acts = []Act{actOf(ActApprove, "approve", "pipeline", e.Pipeline, "episode", e.ID),
				actOf(ActReject, "reject", "pipeline", e.Pipeline, "episode", e.ID)}
		}
		if r.in.Temporal != nil && !r.temporalDown {
			r.remedy(ctx, e, &it)
		}
		if it.rank == rankBudget {
			r.shortfall(e, &it)
		}
		out = append(out, it)
	}
	out = groupApprovals(out)
	if len(eps) == waitingShown {
		out = append(out, NeedItem{Kind: KindEpisode, Title: fmt.Sprintf("more than %d episodes wait: the first are shown", waitingShown),
			Command: allot.StatsCommand(eps[len(eps)-1].Pipeline), rank: rankApproval})
	}
	return out, nil
}

// groupApprovals puts the approvals of each pipeline with more than one
// into one item, which offers to approve them all (each episode gets a
// decision of its own, operator.ApproveEach) and holds each with its own
// acts. The group stands where its oldest would, and names its episodes
// in the form as the page showed them, so an episode that begins to wait
// after the page was read is not approved unseen.
func groupApprovals(items []NeedItem) []NeedItem {
	by := map[string][]NeedItem{}
	for _, it := range items {
		if it.Kind == KindEpisode && it.rank == rankApproval {
			by[it.Pipeline] = append(by[it.Pipeline], it)
		}
	}
	var out []NeedItem
	grouped := map[string]bool{}
	for _, it := range items {
		group := by[it.Pipeline]
		switch {
		case it.Kind != KindEpisode || it.rank != rankApproval || len(group) < 2:
			out = append(out, it)
			continue
		case grouped[it.Pipeline]:
			continue
		}
		grouped[it.Pipeline] = true
		orderNeeds(group, time.Time{})
		ids := make([]string, len(group))
		for i, g := range group {
			ids[i] = g.EpisodeID
		}
		out = append(out, NeedItem{
			Kind:     KindApprovals,
			Title:    fmt.Sprintf("%d episodes of %s wait for approval", len(group), it.Pipeline),
			Detail:   "approving them all records a decision for each, with your reason and name; each can be approved or rejected on its own below",
			Command:  allot.ApproveWaitingCommand(it.Pipeline),
			Since:    group[0].Since,
			Pipeline: it.Pipeline,
			Acts:     []Act{actOf(ActApproveAll, fmt.Sprintf("approve all %d", len(group)), "pipeline", it.Pipeline, "episodes", strings.Join(ids, " "))},
			Group:    group,
			rank:     rankApproval,
		})
	}
	return out
}

// shortfall gives an episode parked on its budgets one figure: how far
// the limit of the budget that refuses it most must rise for it to go on
// (what the whole episode asks, less what the period has free), in place
// of its step's price, which reads as what it would cost.
func (r *reader) shortfall(e ledger.Episode, it *NeedItem) {
	p, err := r.in.Pipelines.Get(e.Pipeline)
	if err != nil {
		return
	}
	key := e.Pipeline + "/" + e.ID
	for _, row := range r.board.Money {
		b, ok := r.in.Pipelines.Budget(row.Budget)
		if !ok || !slices.Contains(row.Parked, key) {
			continue
		}
		short, ok := row.shortOf(b, p)
		if !ok || (it.Money != nil && it.MoneyLabel != "" && short <= it.Money.Amount) {
			continue
		}
		it.Money = &allot.Money{Amount: short, Currency: row.Currency}
		it.MoneyLabel = "short in budget " + row.Budget + " " + row.Period.Period
	}
}

// resolveExits are the resolve exits the workflow's remedies offer for
// the parked step, in the form's order: retry, resubmit, abandon, adopt
// (which goes through the look-up, whose answer prints the reference). A
// task never sent offers neither resubmit nor adopt, since its remedies
// hold neither; an exit the page offered would only be refused.
func resolveExits(e ledger.Episode, step string, remedies []string) []string {
	var exits []string
	has := func(cmd string) bool { return slices.Contains(remedies, cmd) }
	if has(allot.RetryCommand(e.Pipeline, e.ID, step)) {
		exits = append(exits, ExitRetry)
	}
	if has(allot.ResubmitCommand(e.Pipeline, e.ID, step)) {
		exits = append(exits, ExitResubmit)
	}
	abandon, _, _ := strings.Cut(allot.AbandonCommand(e.Pipeline, e.ID, step, "x"), " --reason ")
	if slices.ContainsFunc(remedies, func(r string) bool { return strings.HasPrefix(r, abandon+" ") }) {
		exits = append(exits, ExitAbandon)
	}
	if has(allot.LookupCommand(e.Pipeline, e.ID, step)) {
		exits = append(exits, ExitAdopt)
	}
	return exits
}

// episodeRank is where a waiting episode stands in needOrder.
func episodeRank(e ledger.Episode) int {
	switch allot.Outcome(e.Outcome) {
	case allot.OutcomeWaitingApproval:
		return rankApproval
	case allot.OutcomeWaitingVendor:
		return rankWaitingVendor
	}
	if e.OutcomeReason == allot.BudgetExhausted {
		return rankBudget
	}
	return rankAttention
}

// remedy fills an episode's item from its workflow: the attention's
// reason, its first remedy and the money of the step it parks.
func (r *reader) remedy(ctx context.Context, e ledger.Episode, it *NeedItem) {
	ws, err := report.EpisodeWorkflow(ctx, r.in.Temporal, e.Pipeline, e.ID)
	if err != nil {
		r.temporalFailed(err, "the episodes' remedies are their show commands, which print them")
		return
	}
	if ws == nil || ws.State == nil {
		return
	}
	if a := ws.State.Attention; a != nil {
		it.Detail = fmt.Sprintf("step %s: %s (%s)", a.Step, a.Reason, a.ErrorType)
		if len(a.Remedies) > 0 {
			it.Command = a.Remedies[0]
		}
		if exits := resolveExits(e, a.Step, a.Remedies); a.Step != "" && len(exits) > 0 {
			act := actOf(ActResolve, "resolve", "pipeline", e.Pipeline, "episode", e.ID, "step", a.Step)
			act.Exits = exits
			it.Acts = []Act{act}
		}
		if p, err := r.in.Pipelines.Get(e.Pipeline); err == nil {
			if st, ok := p.Step(a.Step); ok {
				it.Money = r.in.Pipelines.MaxCostOf(e.Pipeline, st)
			}
		}
	}
	if w := ws.State.Waiting; w != nil {
		it.Detail = fmt.Sprintf("waits for vendor %s", w.Vendor)
	}
}

// orderNeeds sorts items by how much they block (needOrder), the longest
// waiting first within a rank (an item of unknown age, such as "more than
// N", last), and says each one's age.
func orderNeeds(items []NeedItem, now time.Time) {
	slices.SortStableFunc(items, func(a, b NeedItem) int {
		if a.rank != b.rank {
			return a.rank - b.rank
		}
		switch {
		case a.Since.IsZero() || b.Since.IsZero():
			return boolInt(a.Since.IsZero()) - boolInt(b.Since.IsZero())
		}
		return a.Since.Compare(b.Since)
	})
	for i := range items {
		if since := items[i].Since; !now.IsZero() && !since.IsZero() && !since.After(now) {
			items[i].Age = age(now.Sub(since))
		}
		orderNeeds(items[i].Group, now)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// age says a duration as a person reads a wait: "under a minute",
// "25 min", "3 h 20 min", "2 days 4 h".
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "under a minute"
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d/time.Minute))
	case d < 24*time.Hour:
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 {
			return fmt.Sprintf("%d h", h)
		}
		return fmt.Sprintf("%d h %d min", h, m)
	}
	days, h := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour)
	unit := "days"
	if days == 1 {
		unit = "day"
	}
	if h == 0 {
		return fmt.Sprintf("%d %s", days, unit)
	}
	return fmt.Sprintf("%d %s %d h", days, unit, h)
}

// latePeriods: every period recorded late that has not completed since.
func latePeriods(ctx context.Context, r *reader) ([]NeedItem, error) {
	recs, err := r.in.Ledger.LateOpen(ctx)
	if err != nil {
		return nil, err
	}
	var out []NeedItem
	for _, rec := range recs {
		cmd := rec.Command
		if cmd == "" {
			cmd = allot.RunsCommand(rec.Pipeline)
		}
		out = append(out, NeedItem{Kind: KindLate, Title: fmt.Sprintf("period %s of %s is late", rec.Period, rec.Pipeline),
			Detail: report.LateDetail(rec), Command: cmd, Since: rec.DueAt, Pipeline: rec.Pipeline, rank: rankLate})
	}
	return out, nil
}

// warnedPeriods: every period warned before its deadline that is still
// short of its episodes, from the moment the warning is recorded (before,
// the page said nothing until the period was late).
func warnedPeriods(ctx context.Context, r *reader) ([]NeedItem, error) {
	recs, err := r.in.Ledger.WarningsOpen(ctx)
	if err != nil {
		return nil, err
	}
	var out []NeedItem
	for _, rec := range recs {
		completed, err := r.in.Ledger.CompletedInPeriod(ctx, rec.Pipeline, rec.Period)
		if err != nil {
			return nil, err
		}
		if completed >= rec.Needed {
			continue // it got its episodes since: on time
		}
		cmd := rec.Command
		if cmd == "" {
			cmd = allot.RunsCommand(rec.Pipeline)
		}
		out = append(out, NeedItem{Kind: KindLate, Title: fmt.Sprintf("period %s of %s may be late: due %s", rec.Period, rec.Pipeline, rec.DueAt.UTC().Format(time.RFC3339)),
			Detail:  fmt.Sprintf("%d of %d episodes completed when warned: %s%s", rec.Completed, rec.Needed, rec.Cause, parenthesized(rec.Detail)),
			Command: cmd, Since: rec.RecordedAt, Pipeline: rec.Pipeline, rank: rankWarning})
	}
	return out, nil
}

func parenthesized(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// driftItems: what the vendors' bills say that the ledger cannot explain,
// not acknowledged yet.
func driftItems(ctx context.Context, r *reader) ([]NeedItem, error) {
	items, err := r.in.Ledger.DriftItems(ctx, ledger.DriftFilter{Unacked: true, Limit: driftShown})
	if err != nil {
		return nil, err
	}
	var out []NeedItem
	for _, d := range items {
		m := allot.Money{Amount: d.Amount, Currency: d.Currency}
		out = append(out, NeedItem{Kind: KindDrift, Title: fmt.Sprintf("drift %d: %s on %s's bill, line %s", d.ID, d.Class, d.Vendor, d.Line),
			Detail: d.Detail, Money: &m, Command: allot.DriftAckCommand(d.ID, "what was done"), Since: d.FoundAt, Pipeline: d.Pipeline, rank: rankDrift})
	}
	if len(items) == driftShown {
		out = append(out, NeedItem{Kind: KindDrift, Title: fmt.Sprintf("more than %d drift items wait", driftShown), Command: allot.DriftListCommand(), rank: rankDrift})
	}
	return out, nil
}

// heldVendors: every paused vendor and open breaker.
func heldVendors(_ context.Context, r *reader) ([]NeedItem, error) {
	var out []NeedItem
	for _, v := range r.vendors {
		if v.Status == "active" {
			continue
		}
		out = append(out, NeedItem{Kind: KindVendor, Title: fmt.Sprintf("vendor %s is %s", v.Name, v.Status),
			Detail: v.Reason, Command: allot.VendorResumeCommand(v.Name), Acts: []Act{actOf(ActVendorResume, "resume", "vendor", v.Name)},
			Since: v.Since, rank: rankVendor})
	}
	return out, nil
}

// runs are the newest run outcomes of the last week, newest first; more
// says the week holds others.
func (r *reader) runs(ctx context.Context) ([]RunRow, bool, error) {
	outs, err := r.in.Ledger.RecentRunOutcomes(ctx, r.now.Add(-runsWindow), runsShown+1)
	if err != nil {
		return nil, false, err
	}
	more := len(outs) > runsShown
	if more {
		outs = outs[:runsShown]
	}
	rows := make([]RunRow, 0, len(outs))
	for _, o := range outs {
		row := RunRow{RunOutcome: o, Normal: report.NormalRun(o.Outcome, o.Reason), RunLink: r.link(o.AllocationKey)}
		if o.EpisodeID != "" {
			row.Link = r.link(allot.EpisodeWorkflowID(o.Pipeline, o.EpisodeID))
		}
		rows = append(rows, row)
	}
	return rows, more, nil
}

// upcoming are each pipeline's scheduled times in the next week.
func (r *reader) upcoming(ctx context.Context) ([]UpcomingRun, error) {
	sched := r.schedules()
	var out []UpcomingRun
	for _, name := range r.in.Pipelines.Names() {
		p, err := r.in.Pipelines.Get(name)
		if err != nil {
			return nil, err
		}
		s, err := sched(ctx, name)
		if err != nil {
			return nil, err
		}
		if !s.Found {
			continue
		}
		r.board.Schedules = append(r.board.Schedules, ScheduleRow{Pipeline: name, Paused: s.Paused})
		price, quoted, err := runPrice(p)
		if err != nil {
			return nil, err
		}
		if s.Paused {
			out = append(out, UpcomingRun{Pipeline: name, Paused: true, Price: price, Quoted: quoted})
			continue
		}
		times, err := s.Spec.Times(s.Zone, r.now, r.now.Add(upcomingWindow), 0)
		if err != nil {
			return nil, fmt.Errorf("pipeline %s: %w", name, err)
		}
		r.board.NextTotal += len(times)
		if len(times) > upcomingShown {
			r.board.NextRest = append(r.board.NextRest, ScheduleRest{Pipeline: name, Times: len(times),
				Link: r.scheduleLink(name), Command: allot.ScheduleDescribeCommand(name)})
		}
		for _, t := range times[:min(len(times), upcomingShown)] {
			out = append(out, UpcomingRun{Pipeline: name, At: t, Price: price, Quoted: quoted})
		}
	}
	slices.SortStableFunc(out, func(a, b UpcomingRun) int { return a.At.Compare(b.At) })
	if len(out) > upcomingShown {
		// The cut falls inside other pipelines' times too: each pipeline
		// with a time left out says where its times are all listed.
		for _, left := range out[upcomingShown:] {
			if !left.Paused && !slices.ContainsFunc(r.board.NextRest, func(x ScheduleRest) bool { return x.Pipeline == left.Pipeline }) {
				r.board.NextRest = append(r.board.NextRest, ScheduleRest{Pipeline: left.Pipeline, Link: r.scheduleLink(left.Pipeline), Command: allot.ScheduleDescribeCommand(left.Pipeline)})
			}
		}
		out = out[:upcomingShown]
	}
	for _, u := range out {
		if !u.Paused {
			r.board.NextShown++
		}
	}
	return out, nil
}

// ScheduleRest is where a pipeline's scheduled times the page leaves out
// are listed: its Schedule in the Web UI, and the CLI's describe.
type ScheduleRest struct {
	Pipeline string
	Times    int // the pipeline's times in the window, when known
	Link     string
	Command  string
}

// scheduleLink is the Web UI page of a pipeline's Schedule, or "".
func (r *reader) scheduleLink(name string) string {
	return r.webUI("schedules", allot.ScheduleID(name))
}

// runPrice is what one run of p reserves at most: the sum of its steps'
// max_cost, by currency; quoted are the paid steps without one.
func runPrice(p *pipeline.Pipeline) ([]allot.Money, []string, error) {
	sums := map[string]int64{}
	var quoted []string
	for _, st := range p.Steps {
		if st.MaxCost == nil {
			if st.Kind == allot.KindPaid {
				quoted = append(quoted, st.Name)
			}
			continue
		}
		if err := allot.AddTo(sums, *st.MaxCost); err != nil {
			return nil, nil, fmt.Errorf("pipeline %s: the price of one run: %w", p.Name, err)
		}
	}
	var out []allot.Money
	for _, c := range slices.Sorted(maps.Keys(sums)) {
		out = append(out, allot.Money{Amount: sums[c], Currency: c})
	}
	return out, quoted, nil
}

// Runs says n runs in words: "1 run", "6 runs".
func Runs(n int) string {
	if n == 1 {
		return "1 run"
	}
	return fmt.Sprintf("%d runs", n)
}

// Bar is a budget row drawn against its limit: the limit is always at
// LimitX, and settled, reserved, the upcoming runs the limit admits and
// those it would refuse follow each other on that scale, the overrun
// drawn past the limit mark and cut at BarWidth (Clipped). A forecast
// hundreds of times the limit thus never shrinks the spend and the limit
// to a sliver. Pixels are floats for the SVG only: every amount stays
// integer.
type Bar struct {
	SettledW, ReservedX, ReservedW, UpcomingX, UpcomingW, RefusedX, RefusedW, LimitX float64
	AlertX                                                                           []float64
	// Clipped: the overrun is longer than the room past the limit.
	Clipped bool
}

// BarWidth is the width of a budget's bar in pixels, and BarLimitX where
// its limit is: the rest is the room for an overrun.
const (
	BarWidth  = 480.0
	BarLimitX = 400.0
)

// Bar draws the row.
func (r BudgetRow) Bar() Bar {
	scale := float64(max(r.Limit, 1))
	px := func(minor int64) float64 { return BarLimitX * float64(minor) / scale }
	b := Bar{LimitX: BarLimitX}
	at := 0.0
	// seg lays the next amount after the last, cut at BarWidth.
	seg := func(minor int64) (x, w float64) {
		x = min(at, BarWidth)
		at += px(minor)
		if at > BarWidth {
			b.Clipped = true
		}
		return x, min(at, BarWidth) - x
	}
	_, b.SettledW = seg(r.Settled)
	b.ReservedX, b.ReservedW = seg(r.Reserved)
	b.UpcomingX, b.UpcomingW = seg(r.AdmittedAmount)
	b.RefusedX, b.RefusedW = seg(r.RefusedAmount)
	for _, a := range r.Alerts {
		b.AlertX = append(b.AlertX, px(a.Amount))
	}
	return b
}
