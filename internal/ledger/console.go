package ledger

// What the operator page reads (docs/design.md, "The operator page"): the
// episodes that wait on a person, a page at a time, and a marker that
// changes when anything the page shows changes. The page polls the marker
// twice a second for every open browser, so each of its parts reads one
// index range or a table of a few rows, however long the history.

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"allot"
)

// WaitingOutcomes are the outcomes of an episode that waits on a person:
// parked on an unknown outcome or an exhausted budget, at its approval
// gate, behind a paused vendor or an open breaker, or failed.
var WaitingOutcomes = []allot.Outcome{
	allot.OutcomeNeedsAttention, allot.OutcomeWaitingApproval, allot.OutcomeWaitingVendor, allot.OutcomeFailed,
}

// DefaultWaitingPage is how many waiting episodes EpisodesWaiting returns
// when asked for none in particular.
const DefaultWaitingPage = 200

// waitingIn is the IN list of WaitingOutcomes and its arguments.
func waitingIn() (string, []any) {
	marks := make([]string, len(WaitingOutcomes))
	args := make([]any, len(WaitingOutcomes))
	for i, o := range WaitingOutcomes {
		marks[i], args[i] = "?", string(o)
	}
	return `outcome IN (` + strings.Join(marks, ", ") + `)`, args
}

// EpisodesWaiting lists at most limit (0: DefaultWaitingPage) episodes
// whose current outcome is one of WaitingOutcomes, by outcome, pipeline
// and episode. It reads one range of the episodes_outcome_pipeline index
// per outcome: the episodes that completed long ago are never read.
func (l *Ledger) EpisodesWaiting(ctx context.Context, limit int) ([]Episode, error) {
	if limit < 0 {
		return nil, invalid("a page of %d waiting episodes: give a positive limit, or 0 for %d", limit, DefaultWaitingPage)
	}
	if limit == 0 {
		limit = DefaultWaitingPage
	}
	query, args := l.episodesWaitingQuery(limit)
	return l.queryEpisodes(ctx, l.r, query, args...)
}

func (l *Ledger) episodesWaitingQuery(limit int) (string, []any) {
	in, args := waitingIn()
	// "outcome <> ''" is the partial index's condition (0006), which the
	// planner cannot see through the parameters.
	return `SELECT ` + episodeCols + ` FROM episodes WHERE ` + in + ` AND outcome <> ''
		ORDER BY outcome, pipeline, episode_id LIMIT ?`, append(args, limit)
}

// changeMarkerParts are the parts of the change marker, each the state of
// one thing the page shows, each read from an index or a table of a few
// rows:
//   - runs: the newest run outcome (run_outcomes_recorded);
//   - waiting episodes: how many, and when the latest became so
//     (episodes_outcome_pipeline, whose waiting range is short);
//   - reservations: how many are held and how much (budget_entries_held):
//     a reservation that settles leaves it;
//   - raises, pauses, drift, deadline records, decisions: the newest ID
//     (their primary keys), and the unacknowledged drift (drift_items_unacked);
//   - vendors: vendor_state, one row per vendor;
//   - costs: the newest recorded_at (cost_entries_recorded), which a
//     cost no budget covers moves alone (the spend chart, the
//     unbudgeted spend);
//   - acknowledged charges outside a budget's records: how many (rows are
//     never removed);
//   - what budgets hold for their scheduled runs: how many rows, and how
//     much (a few rows: the runs a period's limit affords), which the
//     worker's pass rewrites when a Schedule changes or a run's time
//     passes.
var changeMarkerParts = []string{
	`SELECT CAST(MAX(recorded_at) AS TEXT) FROM run_outcomes`,
	`SELECT CAST(COUNT(*) AS TEXT) || '/' || COALESCE(CAST(MAX(outcome_at) AS TEXT), '') FROM episodes WHERE %IN% AND outcome <> ''`,
	`SELECT CAST(COUNT(*) AS TEXT) || '/' || CAST(COALESCE(SUM(reserved), 0) AS TEXT) FROM budget_entries WHERE state = 'held'`,
	`SELECT CAST(MAX(id) AS TEXT) FROM budget_raises`,
	`SELECT CAST(MAX(id) AS TEXT) FROM vendor_pauses`,
	`SELECT CAST(MAX(id) AS TEXT) FROM drift_items`,
	`SELECT CAST(COUNT(*) AS TEXT) FROM drift_items WHERE acked_at IS NULL`,
	`SELECT CAST(MAX(id) AS TEXT) FROM deadline_records`,
	`SELECT CAST(MAX(id) AS TEXT) FROM operator_decisions`,
	`SELECT CAST(COUNT(*) AS TEXT) || '/' || COALESCE(CAST(MAX(updated_at) AS TEXT), '') FROM vendor_state`,
	`SELECT CAST(MAX(recorded_at) AS TEXT) FROM cost_entries`,
	`SELECT CAST(COUNT(*) AS TEXT) FROM charge_acks`,
	`SELECT CAST(COUNT(*) AS TEXT) || '/' || CAST(COALESCE(SUM(amount), 0) AS TEXT) FROM budget_holds`,
}

// ChangeMarker is an opaque string that changes when anything the
// operator page shows changes (changeMarkerParts): a page that holds the
// marker it was drawn at redraws only when it differs. It is one read
// statement; equal markers say nothing was written that the page shows.
func (l *Ledger) ChangeMarker(ctx context.Context) (string, error) {
	query, args := l.changeMarkerQuery()
	vals := make([]sql.NullString, len(changeMarkerParts))
	dest := make([]any, len(vals))
	for i := range vals {
		dest[i] = &vals[i]
	}
	if err := l.r.QueryRowContext(ctx, l.d.q(query), args...).Scan(dest...); err != nil {
		return "", fmt.Errorf("ledger %s: read the change marker: %w", l.where, err)
	}
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = v.String
	}
	return strings.Join(parts, ";"), nil
}

func (l *Ledger) changeMarkerQuery() (string, []any) {
	in, inArgs := waitingIn()
	cols := make([]string, len(changeMarkerParts))
	var args []any
	for i, p := range changeMarkerParts {
		if strings.Contains(p, "%IN%") {
			p = strings.ReplaceAll(p, "%IN%", in)
			args = append(args, inArgs...)
		}
		cols[i] = "(" + p + ")"
	}
	return `SELECT ` + strings.Join(cols, ", "), args
}

// RecentRunOutcomes lists at most limit run outcomes recorded at or after
// since, newest first: the head of one range of run_outcomes_recorded,
// however many runs the window holds.
func (l *Ledger) RecentRunOutcomes(ctx context.Context, since time.Time, limit int) ([]RunOutcome, error) {
	if limit <= 0 {
		return nil, invalid("a page of %d run outcomes: give a positive limit", limit)
	}
	query, args := l.recentRunOutcomesQuery(since, limit)
	return l.queryRunOutcomes(ctx, query, args...)
}

func (l *Ledger) recentRunOutcomesQuery(since time.Time, limit int) (string, []any) {
	return `SELECT pipeline, allocation_key, run_id, nominal_time, nominal_time_source, outcome, reason,
		episode_id, period, sequence, recorded_at FROM run_outcomes WHERE recorded_at >= ?
		ORDER BY recorded_at DESC LIMIT ?`, []any{l.d.timeArg(since), limit}
}
