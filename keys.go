package allot

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The builders of every key and workflow ID allot forms: the Schedule's,
// the keys of runs and imports, the Episode's workflow ID and the paid
// tasks' idempotency keys (idempotency.go). Formed here once, so that the
// workflows, the ledger's audit and import, and the operator's commands
// agree on them.

// ScheduleID is the ID of a pipeline's Temporal Schedule.
func ScheduleID(pipeline string) string { return pipeline + "/schedule" }

// ScheduleActionID is the workflow ID a pipeline's Schedule gives its action;
// Temporal appends "-<nominal time>" to it for every run.
func ScheduleActionID(pipeline string) string { return pipeline + "/scheduled" }

// AllocationKey is the key (and ScheduledRun workflow ID) for a pipeline's run
// at a nominal time: exactly the workflow ID its Schedule forms, so manual
// runs, backfills and scheduled runs deduplicate against each other.
func AllocationKey(pipeline string, nominal time.Time) string {
	return ScheduleActionID(pipeline) + "-" + nominal.UTC().Truncate(time.Second).Format(time.RFC3339)
}

// KeyPrefix starts every allocation key (ScheduledRun workflow ID) of a
// pipeline: the namespace's workflow IDs are shared by all pipelines, so a
// key carries its pipeline (invariant 12 of docs/design.md).
func KeyPrefix(pipeline string) string { return pipeline + "/" }

// NominalTimeOfKey is the nominal time a key in the Schedule's form
// (<pipeline>/scheduled-<RFC3339 UTC>) carries; ok is false for any other
// key.
func NominalTimeOfKey(pipeline, key string) (t time.Time, ok bool) {
	rest, found := strings.CutPrefix(key, ScheduleActionID(pipeline)+"-")
	if !found {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, rest)
	if err != nil || t.Format(time.RFC3339) != rest || t.Location() != time.UTC {
		return time.Time{}, false
	}
	return t, true
}

// ReservedKeyPrefixes start the parts of a pipeline's workflow IDs that are
// not operators' keys: "episode/" its Episode workflows
// (EpisodeWorkflowID), "legacy/" the keys of imported old runs that were
// not scheduled runs (LegacyKey). A run under such a key would take
// an Episode's workflow ID, or an imported run's episode.
var ReservedKeyPrefixes = []string{"episode/", "legacy/"}

// ErrReservedKey: an operator's key falls under a ReservedKeyPrefixes
// prefix of its pipeline.
var ErrReservedKey = errors.New("reserved allocation key")

// PlaceKey puts an operator's key for a pipeline under the pipeline's
// prefix: a key that already carries it is kept, any other is prefixed. A
// key whose first segment names another of the known pipelines is refused
// rather than moved (it was meant for that pipeline), and so is a blank one
// and one that lands under a reserved prefix (ErrReservedKey).
func PlaceKey(pipeline, key string, known []string) (string, error) {
	if strings.TrimSpace(key) == "" {
		return "", fmt.Errorf("allocation key %q is blank: give a key, or leave --key out to use the Schedule's key for the nominal time", key)
	}
	placed := key
	if !strings.HasPrefix(key, KeyPrefix(pipeline)) {
		if first, _, found := strings.Cut(key, "/"); found && first != pipeline && slices.Contains(known, first) {
			return "", fmt.Errorf("allocation key %q names pipeline %s, not %s: a key belongs to one pipeline; run it with --pipeline %s, or give a key without that prefix", key, first, pipeline, first)
		}
		placed = KeyPrefix(pipeline) + key
	}
	rest := strings.TrimPrefix(placed, KeyPrefix(pipeline))
	for _, reserved := range ReservedKeyPrefixes {
		if strings.HasPrefix(rest, reserved) {
			return "", fmt.Errorf("%w: allocation key %q is under %q, which pipeline %s keeps for its %s: leave --key out to run the Schedule's key for the nominal time, or give a key that does not start with %q",
				ErrReservedKey, key, KeyPrefix(pipeline)+reserved, pipeline, reservedFor[reserved], reserved)
		}
	}
	return placed, nil
}

// reservedFor says what each reserved prefix holds.
var reservedFor = map[string]string{
	"episode/": "Episode workflows",
	"legacy/":  "imported old runs",
}

// EpisodeWorkflowID is the ID of the Episode workflow of one episode.
func EpisodeWorkflowID(pipeline, episodeID string) string {
	return pipeline + "/episode/" + episodeID
}

// LegacyKey is the key of an imported old run that was not a scheduled
// run: "<pipeline>/legacy/<old id>". It binds no nominal time.
func LegacyKey(pipeline, oldID string) string { return pipeline + "/legacy/" + oldID }
