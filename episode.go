package allot

import "time"

// EpisodeStatus is where an episode is in its life.
type EpisodeStatus string

// Episode statuses.
const (
	EpisodeAllocated EpisodeStatus = "allocated"
	EpisodeCompleted EpisodeStatus = "completed"
)

// Episode is one allocated unit of work.
type Episode struct {
	Pipeline      string        `json:"pipeline"`
	ID            string        `json:"id"` // "<period>-<sequence>", e.g. "2026-W32-0"
	Period        string        `json:"period"`
	Sequence      int           `json:"sequence"`
	AllocationKey string        `json:"allocation_key"`
	NominalTime   time.Time     `json:"nominal_time"` // UTC
	CreatedAt     time.Time     `json:"created_at"`
	Status        EpisodeStatus `json:"status"`
	CompletedAt   time.Time     `json:"completed_at,omitzero"` // zero until completed
	// Outcome and OutcomeReason are the episode's current outcome as the
	// Episode workflow last reported it (RecordEpisodeOutcome), e.g.
	// "needs_attention" / "OutcomeUnknown"; "" until one is reported.
	Outcome       string `json:"outcome,omitempty"`
	OutcomeReason string `json:"outcome_reason,omitempty"`
	// OutcomeAt is when the outcome or its reason last changed: how long
	// an episode has waited on a person (zero until the first report).
	OutcomeAt time.Time `json:"outcome_at,omitzero"`
	// AllocatedByRun is the run ID of the ScheduledRun that allocated the
	// episode ("" before ledger v9, and for imported episodes).
	AllocatedByRun string `json:"allocated_by_run,omitempty"`
}

// Settled reports whether the episode completed or was rejected; it runs
// again only if an operator reopens it.
func (e Episode) Settled() bool {
	o := Outcome(e.Outcome)
	return o == OutcomeCompleted || o == OutcomeRejected || e.Status == EpisodeCompleted
}

// OutcomeOrStatus is the episode's current outcome, or its status before
// its workflow reported one.
func (e Episode) OutcomeOrStatus() string {
	if e.Outcome == "" {
		return string(e.Status)
	}
	return e.Outcome
}
