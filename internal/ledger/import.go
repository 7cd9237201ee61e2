package ledger

// Imports: episodes carried over from an old system (starter import). Every
// old run becomes one completed (or rejected) episode of the pipeline, with
// its paid tasks, cost entries, step records and decisions, written in one
// transaction under the pipeline's lock, as Allocate takes it. Each imported
// episode keeps its import metadata (table imports): its source, its old ID,
// a digest of the record and when it was imported, so that importing the
// same old run again is skipped and importing it with other data is refused.
//
// An import owns the nominal times it imports: a record of a scheduled run
// (the default) binds the key the Schedule, starter run and backfills form
// for its nominal time (allot.AllocationKey), so a later run for that time
// gets the imported episode back and pays nothing. A record that was not a
// scheduled run keeps LegacyKey and binds no time.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"allot"
)

// Errors of Import that callers tell apart with errors.Is.
var (
	// ErrImportConflict: the batch conflicts with the ledger or with
	// itself; the error is an *ImportConflictError listing every conflict.
	// Nothing was written.
	ErrImportConflict = errors.New("import refused")
	// ErrImportMoved: the episodes the caller prepared for (ImportRecord's
	// EpisodeID) are no longer the ones the import would create, because
	// the pipeline's episodes changed since the plan. Nothing was written;
	// plan again.
	ErrImportMoved = errors.New("the pipeline's episodes changed since the import was planned")
)

// Conflict kinds: short, stable words a script can match on.
const (
	ConflictOldIDChanged    = "old_id_changed"   // the old ID was imported before with other data
	ConflictReferenceOwned  = "reference_owned"  // a remote reference another episode's paid task or cost entry holds
	ConflictKeyBound        = "key_bound"        // an allocation or idempotency key already bound in the ledger
	ConflictDuplicate       = "duplicate"        // an old ID, reference or key twice in the batch
	ConflictHashMismatch    = "hash_mismatch"    // an artifact file whose sha256 is not the record's
	ConflictArtifactMissing = "artifact_missing" // an artifact file that cannot be read
	ConflictArtifactExists  = "artifact_exists"  // the destination of a copy holds another file
	ConflictInvalidRecord   = "invalid_record"   // a record that cannot be imported as it is
	ConflictOverCap         = "over_cap"         // more episodes in a period than the pipeline's cap, without OverCap
	ConflictOverBudget      = "over_budget"      // imported costs that take a budget's period over its limit, without OverBudgetReason
)

// ImportConflict is one reason an import is refused.
type ImportConflict struct {
	Kind   string `json:"kind"`
	OldID  string `json:"old_id,omitempty"`
	Detail string `json:"detail"`
}

func (c ImportConflict) String() string {
	if c.OldID == "" {
		return c.Kind + ": " + c.Detail
	}
	return fmt.Sprintf("%s: old ID %s: %s", c.Kind, c.OldID, c.Detail)
}

// ImportConflictError lists every conflict that refused an import.
type ImportConflictError struct {
	Conflicts []ImportConflict
}

func (e *ImportConflictError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "import refused, nothing was written: %d conflict(s):", len(e.Conflicts))
	for _, c := range e.Conflicts {
		b.WriteString("\n  - ")
		b.WriteString(c.String())
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrImportConflict) true.
func (e *ImportConflictError) Unwrap() error { return ErrImportConflict }

// ImportBatch is one import: records of one pipeline, all or nothing.
type ImportBatch struct {
	Pipeline string
	// Plan is the step plan (JSON, pipeline.Pipeline.Plan) every imported
	// episode is pinned to.
	Plan    string
	Records []ImportRecord
	// KeyFor derives the idempotency key of a paid task whose record
	// gives none (allot.IdempotencyKey). It is needed because the
	// key depends on the episode the import assigns.
	KeyFor func(pipeline, episodeID, step string, revision int) string
	// DryRun plans the import in a read-only transaction and writes
	// nothing: the result says what would be imported, the error lists
	// the conflicts. It works on a ledger opened read-only.
	DryRun bool
	// At is the import's time (zero: now).
	At time.Time
	// MaxPerPeriod is the pipeline's cap (0: none). A period whose
	// existing and imported episodes would exceed it is an over_cap
	// conflict, unless OverCap: then the episodes beyond the cap are
	// imported and their metadata records it.
	MaxPerPeriod int
	OverCap      bool
	// OverBudgetReason, with OverBudgetBy, allows imported costs to take
	// a budget's period over its limit (settled + reserved + imported >
	// limit, raises included), which is an over_budget conflict without
	// it; each episode whose costs count in such a period records who and
	// why (docs/design.md, "Imports and check").
	OverBudgetReason string
	OverBudgetBy     string
}

// ImportRecord is one old run, ready to become an episode.
type ImportRecord struct {
	OldID string
	// Source is where the record was read from, kept in the metadata.
	Source string
	// Digest identifies the record's data: the same old ID with the same
	// digest is skipped, with another digest refused.
	Digest string
	// Scheduled: the old run was the pipeline's scheduled run for its
	// nominal time, and Key is allot.AllocationKey of it. Otherwise Key is
	// LegacyKey, which binds no time.
	Scheduled   bool
	Key         string
	Period      string
	NominalTime time.Time
	// Outcome is completed (the episode is completed at CompletedAt) or
	// rejected (its approval was refused; it stays allocated).
	Outcome     allot.Outcome
	Reason      string // the outcome's reason, e.g. "imported"
	CompletedAt time.Time
	// EpisodeID is the episode a dry run assigned and the caller prepared
	// files for; "" in a dry run. If the import would now assign another,
	// it fails with ErrImportMoved.
	EpisodeID string
	Tasks     []ImportTask
	// Steps are the step records (Pipeline and EpisodeID are filled in).
	Steps []StepRecord
	// Decisions are the operator decisions (Pipeline and EpisodeID are
	// filled in; RequestID must be unique in the record).
	Decisions []OperatorDecision
}

// ImportTask is one paid or effect task of an old run.
type ImportTask struct {
	Step     string
	Revision int
	// State is succeeded (with RemoteRef) or abandoned (without).
	State          allot.PaidTaskState
	RemoteRef      string
	IdempotencyKey string // "": derived with ImportBatch.KeyFor
	Artifact       string
	SHA256         string
	Error          string // an abandoned task's reason
	// Amount and Currency are the cost entry of RemoteRef; no entry when
	// Currency is "".
	Amount   int64
	Currency string
	// Budgets are the budgets that cover the step (pipeline.Set.BudgetsFor),
	// each with the period of the episode's nominal time in the budget's
	// zone (pipeline.Budget.PeriodOf). The cost counts in each as a
	// settled budget entry, as a recorded submission's does; its currency
	// must be each budget's.
	Budgets []ImportBudget
}

// ImportBudget is one budget an imported cost counts in: the budget as the
// pipeline file defines it and the period of the episode's nominal time.
type ImportBudget struct {
	BudgetLimit
	Period string
}

// ImportOverBudget is a budget period an import takes over its limit:
// settled + reserved + imported > limit (a raise's, where one is recorded).
type ImportOverBudget struct {
	Budget   string `json:"budget"`
	Period   string `json:"period"`
	Currency string `json:"currency"`
	Limit    int64  `json:"limit"`
	Raised   bool   `json:"raised,omitempty"`
	Settled  int64  `json:"settled"`
	Reserved int64  `json:"reserved"`
	Imported int64  `json:"imported"`
	// OldIDs are the records whose costs count in the period.
	OldIDs []string `json:"old_ids"`
}

func (o ImportOverBudget) String() string {
	m := func(a int64) string { return allot.Money{Amount: a, Currency: o.Currency}.String() }
	return fmt.Sprintf("budget %s period %s: limit %s, settled %s, reserved %s, imported %s", o.Budget, o.Period, m(o.Limit), m(o.Settled), m(o.Reserved), m(o.Imported))
}

// ImportResult says what an import did, or would do.
type ImportResult struct {
	Pipeline string            `json:"pipeline"`
	DryRun   bool              `json:"dry_run"`
	Episodes []ImportedEpisode `json:"episodes"` // in the batch's order
	// OverBudget lists the budget periods the new records' costs take over
	// their limits: a conflict without OverBudgetReason.
	OverBudget []ImportOverBudget `json:"over_budget,omitempty"`
}

// ImportedEpisode is the episode a record became (or would become).
type ImportedEpisode struct {
	OldID         string    `json:"old_id"`
	EpisodeID     string    `json:"episode_id"`
	Period        string    `json:"period"`
	Sequence      int       `json:"sequence"`
	AllocationKey string    `json:"allocation_key"`
	NominalTime   time.Time `json:"nominal_time"`
	// Skipped: the old ID was imported before with the same data; nothing
	// was written for it.
	Skipped bool `json:"skipped,omitempty"`
	// Scheduled: its key is the scheduled key of its nominal time.
	Scheduled bool `json:"scheduled"`
	// OverCap: it was imported beyond the pipeline's cap (ImportBatch.OverCap).
	OverCap bool `json:"over_cap,omitempty"`
	// OverBudget: its costs count in a budget period the import takes
	// over its limit (ImportBatch.OverBudgetReason allowed it).
	OverBudget bool `json:"over_budget,omitempty"`
	// IdempotencyKeys are the keys of the record's tasks by "step/revision",
	// derived ones included.
	IdempotencyKeys map[string]string `json:"-"`
}

// ImportMeta is one imported episode's migration metadata.
type ImportMeta struct {
	Pipeline   string    `json:"pipeline"`
	OldID      string    `json:"old_id"`
	EpisodeID  string    `json:"episode_id"`
	Source     string    `json:"source"`
	Digest     string    `json:"digest"`
	ImportedAt time.Time `json:"imported_at"`
	// Scheduled: the old run was its time's scheduled run and its episode
	// holds that time's scheduled key; otherwise it holds LegacyKey.
	Scheduled bool `json:"scheduled"`
	// OverCap: imported beyond the pipeline's cap, with --over-cap.
	OverCap bool `json:"over_cap"`
	// OverBudgetBy and OverBudgetReason say who allowed its costs to take
	// a budget period over its limit, and why (--over-budget); "" when
	// they took none over.
	OverBudgetBy     string `json:"over_budget_by,omitempty"`
	OverBudgetReason string `json:"over_budget_reason,omitempty"`
}

// Import writes the batch's records as episodes of the pipeline in one
// transaction under the pipeline's lock, or, with DryRun, plans them in a
// read-only transaction. Each new record gets the period's next sequence,
// in nominal-time order (then old ID) after the period's existing episodes;
// a record whose old ID was imported before with the same digest is
// skipped. Any conflict (an old ID imported with other data, a reference or
// key the ledger already holds, a duplicate in the batch, a period beyond
// the cap without OverCap, a budget period the costs take over its limit
// without OverBudgetReason) refuses the whole batch with an
// *ImportConflictError listing all of them, and nothing is written. Each
// new cost is settled in the budgets its task names (ImportTask.Budgets).
// Malformed records are ErrInvalidInput: among them a key that is not the
// record's form (Scheduled or legacy), a completion or decision before the
// nominal time, a cost above allot.MaxAmount, and a cost whose currency is
// not ISO 4217 or not its budgets'.
func (l *Ledger) Import(ctx context.Context, b ImportBatch) (ImportResult, error) {
	if err := checkImportBatch(b); err != nil {
		return ImportResult{}, err
	}
	if b.At.IsZero() {
		b.At = now()
	}
	b.At = normTime(b.At)
	var res ImportResult
	if b.DryRun {
		err := l.readTx(ctx, func(tx *sql.Tx) error {
			var err error
			res, _, err = l.planImport(ctx, tx, b)
			return err
		})
		return res, err
	}
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		if err := l.lockPipelineTx(ctx, tx, b.Pipeline); err != nil {
			return err
		}
		var (
			fresh []int
			err   error
		)
		res, fresh, err = l.planImport(ctx, tx, b)
		if err != nil {
			return err
		}
		for _, i := range fresh {
			r, ep := b.Records[i], res.Episodes[i]
			if r.EpisodeID != "" && r.EpisodeID != ep.EpisodeID {
				return fmt.Errorf("%w: old ID %s was planned as episode %s and would now be %s (an episode was allocated or imported meanwhile); nothing was written: run the import again",
					ErrImportMoved, r.OldID, r.EpisodeID, ep.EpisodeID)
			}
		}
		for _, i := range fresh {
			if err := l.insertImportedTx(ctx, tx, b, b.Records[i], res.Episodes[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return ImportResult{}, err
	}
	return res, nil
}

func checkImportBatch(b ImportBatch) error {
	switch {
	case b.Pipeline == "":
		return invalid("an import names no pipeline")
	case b.Plan == "":
		return invalid("the import into %s pins no plan: pass the pipeline's plan", b.Pipeline)
	case b.MaxPerPeriod < 0:
		return invalid("the import into %s has a negative cap %d: use 0 for none", b.Pipeline, b.MaxPerPeriod)
	case strings.TrimSpace(b.OverBudgetReason) != "" && strings.TrimSpace(b.OverBudgetBy) == "":
		return invalid("the import into %s goes over budgets without saying who allows it: pass --by NAME", b.Pipeline)
	}
	for _, r := range b.Records {
		where := fmt.Sprintf("import into %s, old ID %q", b.Pipeline, r.OldID)
		switch {
		case r.OldID == "":
			return invalid("import into %s: a record has no old ID", b.Pipeline)
		case r.Key == "" || r.Period == "" || r.NominalTime.IsZero() || r.Digest == "":
			return invalid("%s: a record needs its allocation key, period, nominal time and digest", where)
		case r.Outcome != allot.OutcomeCompleted && r.Outcome != allot.OutcomeRejected:
			return invalid("%s: outcome %q: an imported episode is completed or rejected", where, r.Outcome)
		case r.Outcome == allot.OutcomeCompleted && r.CompletedAt.IsZero():
			return invalid("%s: a completed record needs its completion time", where)
		case !r.CompletedAt.IsZero() && r.CompletedAt.Before(r.NominalTime):
			return invalid("%s: completed at %s, before its nominal time %s", where, r.CompletedAt.UTC().Format(time.RFC3339), r.NominalTime.UTC().Format(time.RFC3339))
		case r.Scheduled && r.Key != allot.AllocationKey(b.Pipeline, r.NominalTime):
			return invalid("%s: key %q: a scheduled run's key is its nominal time's, %q", where, r.Key, allot.AllocationKey(b.Pipeline, r.NominalTime))
		case !r.Scheduled && r.Key != allot.LegacyKey(b.Pipeline, r.OldID):
			return invalid("%s: key %q: a run that was not scheduled keeps the legacy key %q", where, r.Key, allot.LegacyKey(b.Pipeline, r.OldID))
		}
		tasks := map[string]bool{}
		for _, t := range r.Tasks {
			id := fmt.Sprintf("%s/%d", t.Step, t.Revision)
			switch {
			case t.Step == "" || t.Revision < 0:
				return invalid("%s: a task needs a step and a revision of 0 or more", where)
			case tasks[id]:
				return invalid("%s: step %s revision %d appears twice", where, t.Step, t.Revision)
			case t.State == allot.PaidSucceeded && t.RemoteRef == "":
				return invalid("%s: step %s revision %d succeeded without a remote reference", where, t.Step, t.Revision)
			case t.State == allot.PaidAbandoned && (t.RemoteRef != "" || t.Currency != ""):
				return invalid("%s: step %s revision %d is abandoned but carries a reference or a cost", where, t.Step, t.Revision)
			case t.State != allot.PaidSucceeded && t.State != allot.PaidAbandoned:
				return invalid("%s: step %s revision %d is %s: an imported task is succeeded or abandoned", where, t.Step, t.Revision, t.State)
			case t.Amount < 0 || t.Currency == "" && t.Amount != 0:
				return invalid("%s: the cost of %s is %d %q: an absolute amount in minor units with its currency", where, t.RemoteRef, t.Amount, t.Currency)
			case t.Amount > allot.MaxAmount:
				return invalid("%s: the cost of %s is %s, above the bound of %s per entry", where, t.RemoteRef,
					allot.Money{Amount: t.Amount, Currency: t.Currency}, allot.Money{Amount: allot.MaxAmount, Currency: t.Currency})
			case t.Currency != "" && allot.CheckCurrency(t.Currency) != nil:
				return invalid("%s: the cost of %s: %v", where, t.RemoteRef, allot.CheckCurrency(t.Currency))
			}
			if err := checkImportBudgets(where, t); err != nil {
				return err
			}
			tasks[id] = true
		}
		steps := map[string]bool{}
		for _, s := range r.Steps {
			switch {
			case s.Step == "" || s.Status == "" || s.Revision < 0:
				return invalid("%s: a step record needs a step, a status and a revision of 0 or more", where)
			case steps[s.Step]:
				return invalid("%s: step %s has two records", where, s.Step)
			}
			steps[s.Step] = true
		}
		requests := map[string]bool{}
		for _, d := range r.Decisions {
			switch {
			case d.RequestID == "" || requests[d.RequestID]:
				return invalid("%s: decision %q: every decision needs its own request ID", where, d.RequestID)
			case d.Action != allot.ActionApprove && d.Action != allot.ActionReject || d.Step == "":
				return invalid("%s: decision %s: an imported decision approves or rejects a named step", where, d.RequestID)
			case d.At.Before(r.NominalTime):
				return invalid("%s: decision %s at %s, before the run's nominal time %s", where, d.RequestID, d.At.UTC().Format(time.RFC3339), r.NominalTime.UTC().Format(time.RFC3339))
			}
			requests[d.RequestID] = true
		}
	}
	return nil
}

// checkImportBudgets refuses a task's budgets that cannot count its cost:
// one in another currency (amounts are never converted), or malformed.
func checkImportBudgets(where string, t ImportTask) error {
	seen := map[string]bool{}
	for _, b := range t.Budgets {
		switch {
		case b.Budget == "" || b.Period == "":
			return invalid("%s: step %s revision %d: a budget names itself and its period, got %q and %q", where, t.Step, t.Revision, b.Budget, b.Period)
		case seen[b.Budget]:
			return invalid("%s: step %s revision %d: budget %s is given twice", where, t.Step, t.Revision, b.Budget)
		case b.Limit <= 0 || b.Limit > allot.MaxBudgetLimit:
			return invalid("%s: budget %s: a limit of %d is not between 1 and %d minor units", where, b.Budget, b.Limit, allot.MaxBudgetLimit)
		case t.Currency != "" && t.Currency != b.Currency:
			return invalid("%s: the cost of %s is %s, but budget %s counts %s: amounts are never converted; give the cost in %s as the vendor billed it, or correct the record",
				where, t.RemoteRef, allot.Money{Amount: t.Amount, Currency: t.Currency}, b.Budget, b.Currency, b.Currency)
		}
		seen[b.Budget] = true
	}
	return nil
}

// planImport decides, inside tx, what the batch does: which records are
// new and which episodes they get, which are skipped, and every conflict.
// fresh lists the indexes of the new records. On conflicts it returns the
// plan and an *ImportConflictError.
func (l *Ledger) planImport(ctx context.Context, tx *sql.Tx, b ImportBatch) (ImportResult, []int, error) {
	res := ImportResult{Pipeline: b.Pipeline, DryRun: b.DryRun, Episodes: make([]ImportedEpisode, len(b.Records))}
	var conflicts []ImportConflict
	conflict := func(kind, oldID, format string, args ...any) {
		conflicts = append(conflicts, ImportConflict{Kind: kind, OldID: oldID, Detail: fmt.Sprintf(format, args...)})
	}

	imported, err := l.queryImports(ctx, tx, b.Pipeline)
	if err != nil {
		return res, nil, err
	}
	byOld, byEpisode := map[string]ImportMeta{}, map[string]ImportMeta{}
	for _, m := range imported {
		byOld[m.OldID], byEpisode[m.EpisodeID] = m, m
	}

	var fresh []int
	firstAt := map[string]int{}
	keyAt := map[string]int{} // allocation key -> the first record that claims it
	for i, r := range b.Records {
		ep := &res.Episodes[i]
		ep.OldID, ep.AllocationKey, ep.NominalTime, ep.Period, ep.Scheduled = r.OldID, r.Key, normTime(r.NominalTime), r.Period, r.Scheduled
		if j, dup := firstAt[r.OldID]; dup {
			conflict(ConflictDuplicate, r.OldID, "the old ID appears twice in the source (records %d and %d): an old ID is one run", j+1, i+1)
			continue
		}
		firstAt[r.OldID] = i
		if m, ok := byOld[r.OldID]; ok {
			if m.Digest != r.Digest {
				conflict(ConflictOldIDChanged, r.OldID, "it was imported as episode %s (from %s, at %s) with other data: an imported run is never changed; correct the source to match what was imported, or give this run another old ID",
					m.EpisodeID, m.Source, m.ImportedAt.Format(time.RFC3339))
				continue
			}
			eps, err := l.queryEpisodes(ctx, tx, `SELECT `+episodeCols+` FROM episodes WHERE pipeline = ? AND episode_id = ?`, b.Pipeline, m.EpisodeID)
			if err != nil {
				return res, nil, err
			}
			if len(eps) == 1 {
				ep.EpisodeID, ep.Period, ep.Sequence, ep.AllocationKey, ep.NominalTime = eps[0].ID, eps[0].Period, eps[0].Sequence, eps[0].AllocationKey, eps[0].NominalTime
			} else {
				ep.EpisodeID = m.EpisodeID
			}
			ep.Skipped, ep.Scheduled, ep.OverCap = true, m.Scheduled, m.OverCap
			continue
		}
		when := ep.NominalTime.Format(time.RFC3339)
		if j, dup := keyAt[r.Key]; dup {
			conflict(ConflictDuplicate, r.OldID, "old IDs %s and %s both say they were the scheduled run of %s (key %q): a nominal time has one scheduled run; mark the others \"scheduled\": false",
				b.Records[j].OldID, r.OldID, when, r.Key)
			continue
		}
		keyAt[r.Key] = i
		eps, err := l.queryEpisodes(ctx, tx, `SELECT `+episodeCols+` FROM episodes WHERE pipeline = ? AND allocation_key = ? LIMIT 1`, b.Pipeline, r.Key)
		if err != nil {
			return res, nil, err
		}
		if len(eps) > 0 {
			holder := eps[0]
			switch m, imported := byEpisode[holder.ID]; {
			case imported:
				conflict(ConflictKeyBound, r.OldID, "allocation key %q is already bound to episode %s, imported from old ID %s: a nominal time has one scheduled run; mark this record \"scheduled\": false if it was an extra run, or leave it out",
					r.Key, holder.ID, m.OldID)
			case r.Scheduled:
				conflict(ConflictKeyBound, r.OldID, "the scheduled run of %s already ran in this ledger: its key %q is bound to episode %s, which was not imported; mark this record \"scheduled\": false if it was an extra run of the period, or leave it out",
					when, r.Key, holder.ID)
			default:
				conflict(ConflictKeyBound, r.OldID, "allocation key %q is already bound to episode %s, which was not imported: rename the old run, or leave it out of the import", r.Key, holder.ID)
			}
			continue
		}
		fresh = append(fresh, i)
	}

	// Sequences: after the period's existing episodes, in nominal-time
	// order, then old ID.
	order := slices.Clone(fresh)
	slices.SortStableFunc(order, func(a, c int) int {
		ra, rc := b.Records[a], b.Records[c]
		if d := ra.NominalTime.Compare(rc.NominalTime); d != 0 {
			return d
		}
		return strings.Compare(ra.OldID, rc.OldID)
	})
	// The cap counts episodes as Allocate does: every episode of the
	// period, then the imported ones in that order.
	next, count := map[string]int{}, map[string]int{}
	over := map[string][]string{} // period -> the old IDs beyond the cap
	var overOrder []string
	for _, i := range order {
		period := b.Records[i].Period
		if _, ok := next[period]; !ok {
			var (
				last sql.NullInt64
				n    int
			)
			if err := tx.QueryRowContext(ctx, l.d.q(`SELECT MAX(sequence), COUNT(*) FROM episodes WHERE pipeline = ? AND period = ?`), b.Pipeline, period).Scan(&last, &n); err != nil {
				return res, nil, fmt.Errorf("ledger %s: read the last sequence of %s/%s: %w", l.where, b.Pipeline, period, err)
			}
			next[period], count[period] = 0, n
			if last.Valid {
				next[period] = int(last.Int64) + 1
			}
		}
		ep := &res.Episodes[i]
		ep.Sequence = next[period]
		ep.EpisodeID = EpisodeID(period, ep.Sequence)
		next[period]++
		if b.MaxPerPeriod > 0 && count[period] >= b.MaxPerPeriod {
			ep.OverCap = true
			if over[period] == nil {
				overOrder = append(overOrder, period)
			}
			over[period] = append(over[period], ep.OldID)
		}
		count[period]++
	}
	if !b.OverCap {
		for _, period := range overOrder {
			conflict(ConflictOverCap, "", "period %s would hold %d episodes, over pipeline %s's cap of %d per period (max_episodes_per_period): old IDs %s are beyond it. If the old system did run them, import them anyway with --over-cap (each is recorded as imported over the cap); else leave them out",
				period, count[period], b.Pipeline, b.MaxPerPeriod, strings.Join(over[period], ", "))
		}
	}

	// References and idempotency keys: each once in the batch, none held
	// in the ledger.
	type owner struct {
		oldID, step string
		revision    int
	}
	refs, keys := map[string]owner{}, map[string]owner{}
	for _, i := range fresh {
		r, ep := b.Records[i], &res.Episodes[i]
		ep.IdempotencyKeys = map[string]string{}
		for _, t := range r.Tasks {
			if t.State != allot.PaidSucceeded {
				continue
			}
			key := t.IdempotencyKey
			if key == "" {
				if b.KeyFor == nil {
					return res, nil, invalid("import into %s: old ID %s step %s has no idempotency key and the batch has no KeyFor to derive it", b.Pipeline, r.OldID, t.Step)
				}
				key = b.KeyFor(b.Pipeline, ep.EpisodeID, t.Step, t.Revision)
			}
			ep.IdempotencyKeys[fmt.Sprintf("%s/%d", t.Step, t.Revision)] = key
			me := owner{r.OldID, t.Step, t.Revision}
			if o, dup := refs[t.RemoteRef]; dup {
				conflict(ConflictDuplicate, r.OldID, "remote reference %q of step %s revision %d is also old ID %s's (step %s revision %d): a reference is one vendor task, booked once",
					t.RemoteRef, t.Step, t.Revision, o.oldID, o.step, o.revision)
			} else {
				refs[t.RemoteRef] = me
				if err := l.refHeld(ctx, tx, t.RemoteRef, func(held string) {
					conflict(ConflictReferenceOwned, r.OldID, "remote reference %q of step %s revision %d is already %s: a reference is booked once; leave it out, or correct the source",
						t.RemoteRef, t.Step, t.Revision, held)
				}); err != nil {
					return res, nil, err
				}
			}
			if o, dup := keys[key]; dup {
				conflict(ConflictDuplicate, r.OldID, "idempotency key %q of step %s revision %d is also old ID %s's (step %s revision %d): the vendor would take them for one task",
					key, t.Step, t.Revision, o.oldID, o.step, o.revision)
			} else {
				keys[key] = me
				held, err := l.queryPaidTasks(ctx, tx, `SELECT `+paidTaskCols+` FROM paid_tasks WHERE idempotency_key = ? AND idempotency_key <> ''`, key)
				if err != nil {
					return res, nil, err
				}
				for _, h := range held {
					conflict(ConflictKeyBound, r.OldID, "idempotency key %q of step %s revision %d is already bound to %s: a key is one vendor task",
						key, t.Step, t.Revision, describe(h.PaidTaskRef))
				}
			}
		}
	}
	overBudget, err := l.importOverBudgetTx(ctx, tx, b, fresh)
	if err != nil {
		return res, nil, err
	}
	res.OverBudget = overBudget
	for _, o := range overBudget {
		if strings.TrimSpace(b.OverBudgetReason) != "" {
			for _, i := range fresh {
				if slices.Contains(o.OldIDs, b.Records[i].OldID) {
					res.Episodes[i].OverBudget = true
				}
			}
			continue
		}
		fix := "raise the period first"
		if needed, err := allot.AddAmounts(o.Settled, o.Reserved, o.Imported); err == nil && needed <= allot.MaxBudgetLimit {
			fix = "raise the period first: " + allot.BudgetRaiseCommand(o.Budget, o.Period, needed, "imported costs of "+b.Pipeline)
		}
		conflict(ConflictOverBudget, "", "%s: the imported costs of old IDs %s would take it over its limit: if the old system did pay them, import them anyway with --over-budget REASON (recorded with who and why; check then reports the period while its settled costs are above the limit), or %s",
			o, strings.Join(o.OldIDs, ", "), fix)
	}
	if len(conflicts) > 0 {
		return res, fresh, &ImportConflictError{Conflicts: conflicts}
	}
	return res, fresh, nil
}

// importOverBudgetTx sums the new records' costs per (budget, period) and
// lists the periods they take over the limit: settled + reserved +
// imported > limit, a raise's limit where one is recorded (invariant 20 of
// docs/design.md). Writing, it takes each period's lock first, in the
// order admissions take them, so that no admission slips in between.
func (l *Ledger) importOverBudgetTx(ctx context.Context, tx *sql.Tx, b ImportBatch, fresh []int) ([]ImportOverBudget, error) {
	type period struct{ budget, period string }
	sums := map[period]*ImportOverBudget{}
	limits := map[period]int64{}
	var order []period
	for _, i := range fresh {
		r := b.Records[i]
		for _, t := range r.Tasks {
			if t.Currency == "" {
				continue
			}
			for _, bu := range t.Budgets {
				k := period{bu.Budget, bu.Period}
				o, ok := sums[k]
				if !ok {
					o = &ImportOverBudget{Budget: bu.Budget, Period: bu.Period, Currency: bu.Currency}
					sums[k], limits[k] = o, bu.Limit
					order = append(order, k)
				}
				sum, err := allot.AddAmounts(o.Imported, t.Amount)
				if err != nil {
					sum = math.MaxInt64 // saturates: over any limit, never wrapped
				}
				o.Imported = sum
				if !slices.Contains(o.OldIDs, r.OldID) {
					o.OldIDs = append(o.OldIDs, r.OldID)
				}
			}
		}
	}
	slices.SortFunc(order, func(a, c period) int {
		if d := strings.Compare(a.budget, c.budget); d != 0 {
			return d
		}
		return strings.Compare(a.period, c.period)
	})
	var out []ImportOverBudget
	for _, k := range order {
		if !b.DryRun {
			if err := l.lockBudgetTx(ctx, tx, k.budget, k.period); err != nil {
				return nil, err
			}
		}
		o := sums[k]
		var err error
		if o.Limit, o.Raised, err = l.periodLimit(ctx, tx, k.budget, k.period, o.Currency, limits[k]); err != nil {
			return nil, err
		}
		if o.Settled, o.Reserved, err = l.periodSpend(ctx, tx, k.budget, k.period, o.Currency); err != nil {
			return nil, err
		}
		if !(allot.BudgetSpend{Settled: o.Settled, Reserved: o.Reserved}).Admits(o.Limit, o.Imported) {
			out = append(out, *o)
		}
	}
	return out, nil
}

// refHeld reports, through held, each holder of a remote reference in the
// ledger: a paid task or a cost entry.
func (l *Ledger) refHeld(ctx context.Context, tx *sql.Tx, ref string, held func(string)) error {
	ts, err := l.queryPaidTasks(ctx, tx, `SELECT `+paidTaskCols+` FROM paid_tasks WHERE remote_ref = ? AND remote_ref <> ''`, ref)
	if err != nil {
		return err
	}
	for _, t := range ts {
		held("held by " + describe(t.PaidTaskRef))
	}
	var booked PaidTaskRef
	err = tx.QueryRowContext(ctx, l.d.q(`SELECT pipeline, episode_id, step, revision FROM cost_entries WHERE remote_ref = ?`), ref).
		Scan(&booked.Pipeline, &booked.EpisodeID, &booked.Step, &booked.Revision)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("ledger %s: read cost entry %q: %w", l.where, ref, err)
	}
	if len(ts) == 0 {
		held("the cost entry of " + describe(booked))
	}
	return nil
}

// insertImportedTx writes one new record as its episode.
func (l *Ledger) insertImportedTx(ctx context.Context, tx *sql.Tx, b ImportBatch, r ImportRecord, ep ImportedEpisode) error {
	status, completedAt, outcomeAt := EpisodeCompleted, r.CompletedAt, r.CompletedAt
	if r.Outcome == allot.OutcomeRejected {
		status, completedAt = EpisodeAllocated, time.Time{}
		if outcomeAt.IsZero() {
			outcomeAt = b.At
		}
	}
	reason := r.Reason
	if reason == "" {
		reason = allot.Stage(r.Outcome).Reason()
	}
	where := fmt.Sprintf("ledger %s: import old ID %s as episode %s of %s", l.where, r.OldID, ep.EpisodeID, b.Pipeline)
	if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO episodes
		(pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at, status, completed_at,
		 outcome, outcome_reason, outcome_at, plan)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		b.Pipeline, ep.EpisodeID, ep.Period, ep.Sequence, ep.AllocationKey, l.d.timeArg(ep.NominalTime), l.d.timeArg(b.At),
		string(status), l.d.timeArg(completedAt), string(r.Outcome), reason, l.d.timeArg(outcomeAt), b.Plan); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	overBy, overReason := "", ""
	if ep.OverBudget {
		overBy, overReason = b.OverBudgetBy, b.OverBudgetReason
	}
	if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO imports (`+importCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`), b.Pipeline, r.OldID, ep.EpisodeID, r.Source, r.Digest, l.d.timeArg(b.At), r.Scheduled, ep.OverCap,
		overBy, overReason); err != nil {
		return fmt.Errorf("%s: record its metadata: %w", where, err)
	}
	for _, t := range r.Tasks {
		ref := PaidTaskRef{Pipeline: b.Pipeline, EpisodeID: ep.EpisodeID, Step: t.Step, Revision: t.Revision}
		task := PaidTask{PaidTaskRef: ref, State: t.State, RemoteRef: t.RemoteRef, Artifact: t.Artifact, SHA256: t.SHA256,
			Error: t.Error, CreatedAt: b.At, UpdatedAt: b.At}
		if t.State == allot.PaidSucceeded {
			task.IdempotencyKey = ep.IdempotencyKeys[fmt.Sprintf("%s/%d", t.Step, t.Revision)]
		}
		if err := l.insertPaidTask(ctx, tx, task); err != nil {
			return err
		}
		if t.Currency != "" {
			if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO cost_entries
				(remote_ref, pipeline, episode_id, step, revision, amount, currency, recorded_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
				t.RemoteRef, b.Pipeline, ep.EpisodeID, t.Step, t.Revision, t.Amount, t.Currency, l.d.timeArg(b.At)); err != nil {
				return fmt.Errorf("%s: record the cost of %q: %w", where, t.RemoteRef, err)
			}
			if err := l.settleImportedTx(ctx, tx, ref, t); err != nil {
				return err
			}
		}
	}
	for _, s := range r.Steps {
		s.Pipeline, s.EpisodeID = b.Pipeline, ep.EpisodeID
		if s.CompletedAt.IsZero() {
			s.CompletedAt = b.At
		}
		if err := l.recordStepTx(ctx, tx, s); err != nil {
			return err
		}
	}
	for _, d := range r.Decisions {
		if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO operator_decisions (`+decisionCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			d.RequestID, b.Pipeline, ep.EpisodeID, d.Step, d.Revision, string(d.Action), d.RemoteRef, d.Reason, d.By, l.d.timeArg(d.At)); err != nil {
			return fmt.Errorf("%s: record decision %s: %w", where, d.RequestID, err)
		}
	}
	return nil
}

// settleImportedTx counts an imported cost in every budget that covers its
// step: the entry a recorded submission settles, reserved and settled at
// the cost (the old system was charged it; nothing was admitted ahead),
// through setEntryTx's moves (none -> held -> settled) in the import's
// transaction (docs/design.md, "Budgets").
func (l *Ledger) settleImportedTx(ctx context.Context, tx *sql.Tx, ref PaidTaskRef, t ImportTask) error {
	for _, b := range t.Budgets {
		held := BudgetEntry{Budget: b.Budget, Period: b.Period, PaidTaskRef: ref, State: EntryHeld, Currency: t.Currency,
			Reserved: t.Amount, Granted: t.Amount}
		if err := l.setEntryTx(ctx, tx, nil, held); err != nil {
			return err
		}
		settled := held
		settled.State, settled.Settled = EntrySettled, t.Amount
		if err := l.setEntryTx(ctx, tx, &held, settled); err != nil {
			return err
		}
	}
	return nil
}

const importCols = `pipeline, old_id, episode_id, source, digest, imported_at, scheduled, over_cap, over_budget_by, over_budget_reason`

// Imports lists the import metadata of a pipeline ("" = every pipeline),
// ordered by pipeline and old ID.
func (l *Ledger) Imports(ctx context.Context, pipeline string) ([]ImportMeta, error) {
	return l.queryImports(ctx, l.r, pipeline)
}

func (l *Ledger) queryImports(ctx context.Context, db querier, pipeline string) ([]ImportMeta, error) {
	query, args := `SELECT `+importCols+` FROM imports`, []any(nil)
	if pipeline != "" {
		query, args = query+` WHERE pipeline = ?`, append(args, pipeline)
	}
	rows, err := db.QueryContext(ctx, l.d.q(query+` ORDER BY pipeline, old_id`), args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: query imports: %w", l.where, err)
	}
	defer rows.Close()
	var out []ImportMeta
	for rows.Next() {
		var m ImportMeta
		if err := rows.Scan(&m.Pipeline, &m.OldID, &m.EpisodeID, &m.Source, &m.Digest, dbTime{&m.ImportedAt}, &m.Scheduled, &m.OverCap,
			&m.OverBudgetBy, &m.OverBudgetReason); err != nil {
			return nil, fmt.Errorf("ledger %s: read import: %w", l.where, err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read imports: %w", l.where, err)
	}
	return out, nil
}
