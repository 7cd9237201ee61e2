package workflows

// Every workflow.GetVersion marker of allot's workflows, with what it
// guards. A change that would make a running workflow's history replay
// differently goes behind a new marker here, with a saved history of the
// old shape in testdata/ (TestReplaySavedHistories), and the old branch is
// kept until no history can still hold it. TestEveryGetVersionIsListed
// keeps this file the only place that names them.
const (
	// recordOutcomeChange (Episode): the episode records each outcome
	// (stage and reason) in the ledger; before it, only the search
	// attribute showed it. Histories: testdata/v1.
	recordOutcomeChange  = "record-episode-outcome"
	recordOutcomeVersion = 1

	// commandTableChange (Episode): update handlers check the command table
	// again when their turn comes (the state may have moved since the
	// validator ran) and refuse with NotReady before any activity runs.
	// Histories: testdata/v2.
	commandTableChange  = "command-table"
	commandTableVersion = 1

	// adapterLookupAgainChange (Episode, activity adapters): a look-up the
	// vendor did not answer is asked again after a pause, instead of
	// PaidAfterLookup being retried with the non-answer.
	// Histories: testdata/v3/custom_steps_episode.json (before),
	// testdata/v4/adapter_faults_episode.json (after).
	adapterLookupAgainChange  = "adapter-lookup-again"
	adapterLookupAgainVersion = 1

	// adapterAwaitFetchChange (Episode, activity adapters): the await polls
	// the adapter's status until the task ends and then fetches its result,
	// instead of ending at the first answered status call.
	// Histories: testdata/v3/custom_steps_episode.json.
	adapterAwaitFetchChange  = "adapter-await-fetch"
	adapterAwaitFetchVersion = 1

	// vendorGateChange (Episode, activity adapters): each request of the
	// Episode to an activity adapter (a send's attempt, a status poll, a
	// fetch) first passes the vendor's gate (PaidVendorGate: a pause, the
	// breaker, max_in_flight, rate) and is released after
	// (PaidVendorRelease). Histories: testdata/v3/custom_steps_episode.json
	// and testdata/v4/adapter_faults_episode.json (before),
	// testdata/v5/vendor_wait_episode.json (after).
	vendorGateChange  = "vendor-gate"
	vendorGateVersion = 1

	// vendorGateEachRequestChange (Episode, activity adapters): every
	// request of a submission's attempt asks the vendor's gate right before
	// it and is released right after: the quote (before it, none), each
	// look-up of the look-up loop and the send (before it, Prepare's one
	// pass covered them all, so a pause or a trip that came during the
	// attempt did not stop it: issue 24). Asked only where vendorGateChange
	// is. Histories before it: testdata/v5/vendor_wait_episode.json (and
	// every later one with an activity adapter's paid step); with it:
	// testdata/v9/vendor_wait_episode.json, adapter_faults_episode.json.
	vendorGateEachRequestChange  = "vendor-gate-each-request"
	vendorGateEachRequestVersion = 1

	// verifyEpisodeLedgerChange (ScheduledRun): an Episode workflow that
	// already exists is checked to belong to this run's ledger.
	// Histories: testdata/v3/scheduled_run_episode_running.json.
	verifyEpisodeLedgerChange  = "verify-episode-ledger"
	verifyEpisodeLedgerVersion = 1

	// localBookkeepingChange (ScheduledRun, Episode): the ledger's
	// bookkeeping (Allocate, RecordRunOutcome, VerifyEpisodeLedger;
	// LoadEpisode, RecordEpisodeOutcome, CompleteEpisode) runs as local
	// activities, so that a run costs the activities of its steps and
	// little more (issue 18). Histories before it: testdata/v1 to v4.
	localBookkeepingChange  = "local-bookkeeping"
	localBookkeepingVersion = 1
	// leanRunVersion (ScheduledRun, Episode), version 2 of the same
	// change, so that it adds no marker: neither workflow upserts a search
	// attribute to the value it already has (the start gives them), the
	// ScheduledRun shows its allocation's attributes with its outcome's, and
	// the Episode no longer asks recordOutcomeChange (it records outcomes).
	// Five upserts (visibility writes) and six events fewer per run and
	// episode (issue 18). Histories before it: testdata/v7 (and v5, v6);
	// after: testdata/v8.
	leanRunVersion = 2

	// catchUpChange (ScheduledRun): a run its Schedule started that begins
	// late asks the pipeline's catch_up policy (DecideCatchUp, a local
	// activity) and, for a missed time the policy does not run, records a
	// skipped run (missed_catch_up) instead of allocating. Histories before
	// it: testdata/v1 to v5; after: testdata/v6/scheduled_run_missed.json.
	catchUpChange  = "catch-up"
	catchUpVersion = 1

	// batchStoppedRetryChange (BatchCollector): a batch whose driving
	// stopped on a refusal stays in flight, shown in the state query, and
	// is driven again from the ledger's state after batchStoppedRetry;
	// before it, the collector let the batch go. Histories before it:
	// testdata/v10/batch_collector_stopped.json; the others of v10 never
	// reach it.
	batchStoppedRetryChange  = "batch-stopped-retry"
	batchStoppedRetryVersion = 1

	// stalePassChange (Episode, activity adapters): a pass of the vendor's
	// gate that is older than stalePass when the Episode would use it (its
	// workflow task sat on a killed worker's sticky queue, or other
	// activities ran since the admission) is given back and the gate asked
	// again, so that a pause that came meanwhile stops the request. Asked
	// only when a pass is stale, so histories without one have no marker
	// and replay the same commands. Histories before it:
	// testdata/v9/vendor_wait_episode.json (its gate waited, so its pass
	// was stale and was used); after: testdata/v11/vendor_wait_episode.json.
	stalePassChange  = "vendor-gate-stale-pass"
	stalePassVersion = 1
)

// Changes without a marker, and why none is needed:
//
//   - Budgets (BudgetExhausted parks the step; waitForBudget asks the
//     budgets on a timer and on BudgetRaisedSignal; the activity adapter's
//     quote): each new command is reached only from an activity result no
//     history recorded before budgets existed (a BudgetExhausted failure, a
//     PaidPrepare plan with Next "quote"), so every saved history replays
//     the same commands. The BudgetRaisedSignal handler only sets a flag
//     and adds no command.
