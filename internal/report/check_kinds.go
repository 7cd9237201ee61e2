package report

import (
	"strings"

	"allot/internal/ledger"
)

// CheckKindRow is one row of check's table of violations: the kinds it
// groups, what they found, and the remedy.
type CheckKindRow struct {
	Kinds  []string
	Found  string
	Remedy string
}

// CheckKindTable is the one declaration of every violation kind check
// reports: docs/import-and-check.md's table is rendered from it
// (CheckKindTableMarkdown; a test keeps the copy equal and every kind
// listed once).
var CheckKindTable = []CheckKindRow{
	{[]string{ledger.KindKeyAmbiguous, ledger.KindKeyCrossesPeriod},
		`a key bound to several episodes (invariants 1, 3)`,
		`keep one episode for the key, re-key the others`},
	{[]string{ledger.KindSequenceDuplicate, ledger.KindSequenceGap},
		`a period's sequences are not 0..n-1 (invariant 2)`,
		`correct the edited or imported rows`},
	{[]string{ledger.KindNoReference},
		`a task submitted, succeeded or failed without its reference (7)`,
		"find it by idempotency key (`starter episode lookup`) and record it"},
	{[]string{ledger.KindReferenceShared, ledger.KindIdempotencyShared},
		`one reference or key on several tasks (7)`,
		`decide which task owns it`},
	{[]string{ledger.KindCostOrphan, ledger.KindCostMisbooked},
		`a cost entry without its task, or booked to another (8)`,
		`correct the entry`},
	{[]string{ledger.KindCostMissing, ledger.KindCostOnEffect},
		`a paid step's reference without its cost; an effect's with one`,
		"`check --vendor`, then correct the entry"},
	{[]string{ledger.KindUnknownOutcome},
		"an intent without a reference older than `--stale-intent`",
		"fix: `starter episode lookup ...`, then `resolve --adopt` or `--retry`"},
	{[]string{ledger.KindPastHorizon},
		"an intent older than its step's vendor keeps idempotency keys (`idempotency_horizon`, see [Vendors](steps-and-vendors.md#vendors))",
		"check the vendor's side: `starter episode lookup ...` prints the adopt command if it still knows the key; else `resolve --resubmit` or `--abandon`"},
	{[]string{ledger.KindNoOutcome, ledger.KindNoReason},
		`an episode without an outcome; an outcome without its reason`,
		"look at its workflow (`starter episode show`)"},
	{[]string{ledger.KindStepIncomplete, ledger.KindPlanInvalid},
		`a completed episode with a step of its pinned plan not done; a plan that is not steps`,
		"`starter episode show`"},
	{[]string{ledger.KindRunLost, ledger.KindRunNoReason, ledger.KindRunEpisodeMissing},
		`an episode whose key has no recorded run; a run without its reason or naming a missing episode`,
		"look at the `ScheduledRun` workflow (ID = key)"},
	{[]string{ledger.KindAllocatedRuns},
		"an episode not recorded `allocated` by exactly one run (a run that allocated and then failed counts)",
		`look at the key's runs`},
	{[]string{ledger.KindCostOutOfRange},
		`a cost entry above 10^12 minor units (or costs whose total overflows): every total would be wrong`,
		"`check --vendor`, then correct the entry"},
	{[]string{ledger.KindImportEpisode, ledger.KindImportKey, ledger.KindImportMetadata},
		"import metadata without its episode; an imported episode whose key is not its time's scheduled key (or, `\"scheduled\": false`, `<pipeline>/legacy/<old id>`), e.g. one imported before imports bound their times whose time a run took since (the detail names that episode: it may have paid again); a legacy key without metadata or run",
		"restore the rows from a backup; compare the episodes with the `starter episode show` commands the violation prints; an episode written under a legacy key outside `starter import` has no source to import again"},
	{[]string{ledger.KindArtifactMissing, ledger.KindArtifactMismatch},
		`a file the ledger names is gone, or its sha256 is not the ledger's`,
		`restore it; a paid result can be reworked (one more charge)`},
	{[]string{ledger.KindChargeUnrecorded},
		"`--vendor`: a charge the ledger has no cost for",
		"matched by key to an intent: fix `starter episode lookup ...`; else find who submitted it"},
	{[]string{KindChargeOtherVendor},
		"`--vendor`: a charge for a task whose cost the ledger books under a vendor of another account (URL or key)",
		"leave the ledger's entry (another would count it twice); ask the vendor which account it charged, correct the vendor's URL or key"},
	{[]string{ledger.KindCostUncharged, ledger.KindAmountDiffers},
		"`--vendor`: a cost the vendor did not charge within its `bill_grace`; amounts that differ beyond its `bill_tolerance`, or currencies",
		`ask the vendor, correct the ledger or dispute`},
	{[]string{KindDoubleCharge, KindRefunded},
		"`--vendor`: a second charge line for one task; a refund line",
		"dispute the second charge; find out why the vendor refunded"},
	{[]string{KindDriftOpen},
		"a drift item the worker's reconciler recorded from a vendor's bill, not acknowledged (invariant 22; `starter drift list`)",
		"do what its detail says, then `starter drift ack --id N --reason TEXT`"},
	{[]string{KindPeriodLate},
		"a period recorded late at its deadline that has not completed since (see [Period deadlines](operating.md#period-deadlines); `starter runs --pipeline P`)",
		"run the command the violation prints (its record's: the one `starter episode show` prints, or the one that starts the missing run), then let the period complete"},
	{[]string{KindWorkflowMissing, KindWorkflowEnded},
		"`--workflows`: an unsettled episode whose Episode workflow does not exist (never started, or its history is gone) or ended failed, terminated or timed out",
		"fix: `starter episode resume --pipeline P --episode E`"},
	{[]string{KindWorkflowForeign},
		"`--workflows`: the episode's workflow ID runs another ledger's episode (two ledgers on one namespace and task queue)",
		"give each ledger its own task queue (`ALLOT_TASK_QUEUE`) or namespace, then `starter episode resume`"},
	{[]string{ledger.KindBudgetExceeded},
		"a budget's period settled above its limit, by its entries or by the recorded charges of the tasks it covers (invariant 20; only a lowered limit, costs above their reservations, charges without a reservation or `import --over-budget` do it)",
		"look at `starter budget show BUDGET --period P`"},
	{[]string{ledger.KindCostOverReservation},
		`the vendor charged more than the task reserved (booked as charged, counted)`,
		"raise the step's `max_cost`"},
	{[]string{ledger.KindReservationMissing, ledger.KindReservationStale, ledger.KindBudgetCostDiffers},
		`an open intent a budget covers holding no reservation in it; a reservation held by a task that is no longer an intent, or settled at another amount than its cost`,
		`settle or abandon the task; correct the edited rows`},
	{[]string{KindChargeUnreserved},
		`a task of a covered step reached the vendor without a reservation in the budget (sent before the budget covered it, or by a path that skipped admission)`,
		"the charge stands and is counted in the period's charges; look at `starter budget show BUDGET --period P`, then, knowing why, `starter budget acknowledge BUDGET --period P --reason TEXT` ([Budgets](budgets.md))"},
}

// CheckKindTableMarkdown renders CheckKindTable for the docs.
func CheckKindTableMarkdown() string {
	var b strings.Builder
	b.WriteString("| kind | found | remedy |\n|---|---|---|\n")
	for _, r := range CheckKindTable {
		kinds := make([]string, len(r.Kinds))
		for i, k := range r.Kinds {
			kinds[i] = "`" + k + "`"
		}
		b.WriteString("| " + strings.Join(kinds, ", ") + " | " + r.Found + " | " + r.Remedy + " |\n")
	}
	return b.String()
}
