package allot

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The builders of every key and workflow ID allot forms: the Schedule's,
// the keys of runs and imports, the Episode's workflow ID and the paid
// tasks' idempotency keys (idempotency.go). Formed here once, so that the
// workflows, the ledger's audit and import, and the operator's commands
// agree on them.

// ScheduleID is the ID of a pipeline's Temporal Schedule.
func ScheduleID(pipeline string) string { return pipeline + "/schedule" }

// DeadlineWatchID is the workflow ID of a pipeline's DeadlineWatch: one
// per pipeline, however many workers start it.
func DeadlineWatchID(pipeline string) string { return KeyPrefix(pipeline) + deadlineWatchKey }

// BatchCollectorID is the workflow ID of the collector that sends one
// vendor's batches of one kind (docs/design.md, "Batches"). The colon is
// in no pipeline name, so no run's workflow ID is ever one.
func BatchCollectorID(vendor, kind string) string { return "allot-batches:" + vendor + ":" + kind }

// deadlineWatchKey is the rest of DeadlineWatchID after the pipeline's
// prefix: a run under that key would share the watch's workflow ID.
const deadlineWatchKey = "deadlines"

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

// ErrReservedKey means an operator's key falls under a ReservedKeyPrefixes
// prefix of its pipeline.
var ErrReservedKey = &Error{Type: InvalidAllocationKey, Message: "reserved allocation key"}

// PlaceKey puts an operator's key for a pipeline under the pipeline's
// prefix: a key that already carries it is kept, any other is prefixed. A
// key whose first segment names another of the known pipelines is refused
// rather than moved (it was meant for that pipeline), and so is a blank one
// and one that lands under a reserved prefix (ErrReservedKey).
func PlaceKey(pipeline, key string, known []string) (string, error) {
	if strings.TrimSpace(key) == "" {
		return "", Errorf(InvalidAllocationKey, "allocation key %q is blank: give a key, or leave --key out to use the Schedule's key for the nominal time", key)
	}
	placed := key
	if !strings.HasPrefix(key, KeyPrefix(pipeline)) {
		if first, _, found := strings.Cut(key, "/"); found && first != pipeline && slices.Contains(known, first) {
			return "", Errorf(InvalidAllocationKey, "allocation key %q names pipeline %s, not %s: a key belongs to one pipeline; run it with --pipeline %s, or give a key without that prefix", key, first, pipeline, first)
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
	if rest == deadlineWatchKey {
		return "", fmt.Errorf("%w: allocation key %q is %s, the workflow ID of pipeline %s's deadline watch: leave --key out to run the Schedule's key for the nominal time, or give another key",
			ErrReservedKey, key, DeadlineWatchID(pipeline), pipeline)
	}
	return placed, nil
}

// MaxAllocationKeyBytes bounds a key: it is a workflow ID and a ledger column.
const MaxAllocationKeyBytes = 200

// ValidateAllocationKey refuses (InvalidAllocationKey) a key that cannot
// be a stable identity: empty, longer than MaxAllocationKeyBytes, not
// UTF-8, or with a character people cannot see.
func ValidateAllocationKey(key string) error {
	switch {
	case key == "":
		return Errorf(InvalidAllocationKey, "allocation key is empty: give --key or leave it out to derive it from the nominal time")
	case len(key) > MaxAllocationKeyBytes:
		return Errorf(InvalidAllocationKey, "allocation key is %d bytes, over the limit of %d: use a shorter key", len(key), MaxAllocationKeyBytes)
	case !utf8.ValidString(key):
		return Errorf(InvalidAllocationKey, "allocation key is not valid UTF-8: use printable text")
	}
	for i, r := range key {
		// Invisible characters (controls, format characters, line
		// separators) would let two keys look alike in the UI and in logs.
		if !unicode.IsPrint(r) {
			return Errorf(InvalidAllocationKey, "allocation key has a control or invisible character %U at byte %d: use printable characters only", r, i)
		}
	}
	return nil
}

// RunKeyInput is a request to run a pipeline, as far as its key goes.
type RunKeyInput struct {
	Pipeline string
	// Known are the pipelines the file defines: a key whose first segment
	// names another of them is refused rather than placed (PlaceKey).
	Known []string
	// Key is the operator's key; "" is the Schedule's key for the nominal
	// time.
	Key string
	// Nominal is when the run was planned; zero is Now without a Key, the
	// time a Schedule-form Key carries with one.
	Nominal time.Time
	Now     time.Time
}

// RunKey is the allocation key a run starts under (its ScheduledRun's
// workflow ID) and the nominal time it stands for.
type RunKey struct {
	Key     string
	Nominal time.Time
}

// ResolveRunKey is the one resolver of a run's key and nominal time, asked
// by every start allot makes (a manual run, its forecast, a fast backfill,
// a catch-up): a missing key is the Schedule's key for the nominal time
// (Now if none), so that every start of one time collapses on one key; a
// given key is placed under the pipeline (PlaceKey), validated
// (ValidateAllocationKey) and agreed with the nominal time it carries. The
// ScheduledRun checks the same rules for starts allot did not make (the
// temporal CLI's, a Schedule's). Errors are InvalidAllocationKey or
// InvalidInput.
func ResolveRunKey(in RunKeyInput) (RunKey, error) {
	nominal := in.Nominal
	if in.Key == "" {
		if nominal.IsZero() {
			nominal = in.Now
		}
		nominal = nominal.UTC().Truncate(time.Second)
		return RunKey{Key: AllocationKey(in.Pipeline, nominal), Nominal: nominal}, nil
	}
	key, err := PlaceKey(in.Pipeline, in.Key, in.Known)
	if err != nil {
		return RunKey{}, err
	}
	if err := ValidateAllocationKey(key); err != nil {
		return RunKey{}, err
	}
	keyTime, ok := NominalTimeOfKey(in.Pipeline, key)
	switch {
	case nominal.IsZero() && ok:
		nominal = keyTime
	case nominal.IsZero():
		return RunKey{}, Errorf(InvalidInput, "key %q carries no nominal time: give it with --nominal-time (e.g. 2026-08-03T02:00:00Z); the period comes from it, never from the clock", key)
	case ok && !nominal.UTC().Truncate(time.Second).Equal(keyTime):
		return RunKey{}, Errorf(InvalidInput, "key %q is the Schedule's key for %s, not for --nominal-time %s: leave --nominal-time out, or leave --key out", key, keyTime.Format(time.RFC3339), nominal.Format(time.RFC3339))
	}
	return RunKey{Key: key, Nominal: nominal}, nil
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
