package allot_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"allot"
)

// One resolver of a run's key: no key is the Schedule's key for the
// nominal time (now if none); a given key is placed under its pipeline,
// validated, and agreed with the time it carries. Refusals are typed.
func TestResolveRunKey(t *testing.T) {
	now := time.Date(2026, 8, 5, 10, 30, 15, 500, time.UTC)
	mon := time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC)
	known := []string{"weekly", "daily"}
	for name, tc := range map[string]struct {
		in       allot.RunKeyInput
		wantKey  string
		wantTime time.Time
		wantType string
	}{
		"no key, no time: now":          {allot.RunKeyInput{}, "weekly/scheduled-2026-08-05T10:30:15Z", now.Truncate(time.Second), ""},
		"no key: the Schedule's key":    {allot.RunKeyInput{Nominal: mon}, allot.AllocationKey("weekly", mon), mon, ""},
		"an unplaced key is placed":     {allot.RunKeyInput{Key: "manual-7", Nominal: mon}, "weekly/manual-7", mon, ""},
		"a placed key is kept":          {allot.RunKeyInput{Key: "weekly/manual-7", Nominal: mon}, "weekly/manual-7", mon, ""},
		"a Schedule key gives its time": {allot.RunKeyInput{Key: allot.AllocationKey("weekly", mon)}, allot.AllocationKey("weekly", mon), mon, ""},
		"a custom key needs a time":     {allot.RunKeyInput{Key: "manual-7"}, "", time.Time{}, allot.InvalidInput},
		"a key and another time":        {allot.RunKeyInput{Key: allot.AllocationKey("weekly", mon), Nominal: mon.Add(time.Hour)}, "", time.Time{}, allot.InvalidInput},
		"another pipeline's key":        {allot.RunKeyInput{Key: "daily/x", Nominal: mon}, "", time.Time{}, allot.InvalidAllocationKey},
		"a reserved key":                {allot.RunKeyInput{Key: "episode/2026-W32-0", Nominal: mon}, "", time.Time{}, allot.InvalidAllocationKey},
		"an invisible character":        {allot.RunKeyInput{Key: "run\u200ba", Nominal: mon}, "", time.Time{}, allot.InvalidAllocationKey},
		"a key over the limit":          {allot.RunKeyInput{Key: strings.Repeat("k", allot.MaxAllocationKeyBytes), Nominal: mon}, "", time.Time{}, allot.InvalidAllocationKey},
	} {
		tc.in.Pipeline, tc.in.Known, tc.in.Now = "weekly", known, now
		got, err := allot.ResolveRunKey(tc.in)
		if typ := allot.ErrorType(err); typ != tc.wantType || (err != nil) != (tc.wantType != "") {
			t.Errorf("%s: error %v (type %q), want type %q", name, err, typ, tc.wantType)
			continue
		}
		if err == nil && (got.Key != tc.wantKey || !got.Nominal.Equal(tc.wantTime)) {
			t.Errorf("%s: %q at %s, want %q at %s", name, got.Key, got.Nominal, tc.wantKey, tc.wantTime)
		}
	}
	if _, err := allot.ResolveRunKey(allot.RunKeyInput{Pipeline: "weekly", Key: "legacy/1", Nominal: mon}); !errors.Is(err, allot.ErrReservedKey) {
		t.Errorf("reserved key: %v, want ErrReservedKey", err)
	}
	// A run under the deadline watch's workflow ID would join the watch.
	for _, key := range []string{"deadlines", allot.DeadlineWatchID("weekly")} {
		if _, err := allot.ResolveRunKey(allot.RunKeyInput{Pipeline: "weekly", Key: key, Nominal: mon}); !errors.Is(err, allot.ErrReservedKey) {
			t.Errorf("key %q: %v, want ErrReservedKey", key, err)
		}
	}
}
