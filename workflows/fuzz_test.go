package workflows

// Fuzz targets for allocation keys (invariant 12 of docs/design.md): the
// key of a pipeline's run at a nominal time, the nominal time such a key
// carries, and where an operator's key is placed. Seeds are in
// testdata/fuzz/<target>; `go test` runs them, .ci/fuzz explores further.

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/pipeline"
)

// FuzzAllocationKey: allot.AllocationKey(p, t) parses back to t (to the second)
// for every time with a four-digit year, the same whatever t's zone; the
// key belongs to p alone; and a key that parses at all is exactly the key
// AllocationKey forms for its time.
func FuzzAllocationKey(f *testing.F) {
	f.Fuzz(func(t *testing.T, name, other string, sec, nsec int64, zoneOffset int32) {
		nominal := time.Unix(sec, nsec).In(time.FixedZone("fuzz", int(zoneOffset%(26*3600))))
		key := allot.AllocationKey(name, nominal)
		if !strings.HasPrefix(key, allot.KeyPrefix(name)) || !strings.HasPrefix(key, allot.ScheduleActionID(name)+"-") {
			t.Fatalf("allot.AllocationKey(%q, %s) = %q: not under the pipeline's prefix", name, nominal, key)
		}
		for _, same := range []time.Time{nominal.UTC(), nominal.Truncate(time.Second), nominal.In(time.FixedZone("other", -7*3600-1800))} {
			if k := allot.AllocationKey(name, same); k != key {
				t.Fatalf("AllocationKey depends on the zone or the fraction of a second: %q for %s, %q for %s", key, nominal, k, same)
			}
		}
		want := nominal.UTC().Truncate(time.Second)
		got, ok := allot.NominalTimeOfKey(name, key)
		if y := want.Year(); y >= 0 && y <= 9999 {
			if !ok || !got.Equal(want) || got.Location() != time.UTC {
				t.Fatalf("allot.NominalTimeOfKey(%q, allot.AllocationKey(%s)) = %s, %v; want %s", name, nominal, got, ok, want)
			}
			if d := nominal.Sub(got); d < 0 || d >= time.Second {
				t.Fatalf("key time %s is not the nominal time %s to the second", got, nominal)
			}
		} else if ok && allot.AllocationKey(name, got) != key {
			t.Fatalf("allot.NominalTimeOfKey(%q) = %s, whose key is %q", key, got, allot.AllocationKey(name, got))
		}
		if other != name {
			if tm, ok := allot.NominalTimeOfKey(other, key); ok {
				t.Fatalf("key %q of pipeline %q parses as pipeline %q's key for %s", key, name, other, tm)
			}
		}
		// Any string: a key that carries a time is the canonical key of
		// that time, so two spellings never name one run.
		for _, k := range []string{other, allot.ScheduleActionID(name) + "-" + other} {
			if tm, ok := allot.NominalTimeOfKey(name, k); ok {
				if allot.AllocationKey(name, tm) != k || tm.Location() != time.UTC || tm.Nanosecond() != 0 {
					t.Fatalf("allot.NominalTimeOfKey(%q, %q) = %s, but that time's key is %q", name, k, tm, allot.AllocationKey(name, tm))
				}
			}
		}
	})
}

// FuzzPlaceKey: an operator's key lands under its pipeline's prefix or is
// refused with a reason that names the problem (another pipeline's key, a
// reserved prefix); placing is idempotent; a
// Schedule's key is kept as it is; and a placed key never belongs to (nor
// carries a time for) another known pipeline.
func FuzzPlaceKey(f *testing.F) {
	f.Fuzz(func(t *testing.T, name, key, known1, known2 string) {
		if pipeline.ValidateName(name) != nil {
			return // callers place keys for pipelines of a validated set
		}
		known := []string{name}
		for _, k := range []string{known1, known2} {
			if pipeline.ValidateName(k) == nil && !slices.Contains(known, k) {
				known = append(known, k)
			}
		}
		placed, err := allot.PlaceKey(name, key, known)
		if again, err2 := allot.PlaceKey(name, key, known); again != placed || (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("allot.PlaceKey(%q, %q) is not deterministic: %q, %v then %q, %v", name, key, placed, err, again, err2)
		}
		if strings.TrimSpace(key) == "" {
			if err == nil || !strings.Contains(err.Error(), "blank") {
				t.Fatalf("allot.PlaceKey(%q, blank %q) = %q, %v; want an error saying it is blank", name, key, placed, err)
			}
			return
		}
		if errors.Is(err, allot.ErrReservedKey) {
			rest := strings.TrimPrefix(key, allot.KeyPrefix(name))
			if !slices.ContainsFunc(allot.ReservedKeyPrefixes, func(p string) bool { return strings.HasPrefix(rest, p) }) {
				t.Fatalf("allot.PlaceKey(%q, %q) refused a key under no reserved prefix: %v", name, key, err)
			}
			if !strings.Contains(err.Error(), "leave --key out") {
				t.Fatalf("allot.PlaceKey(%q, %q): the refusal names no fix: %v", name, key, err)
			}
			return
		}
		if err != nil {
			first, _, found := strings.Cut(key, "/")
			if !found || first == name || !slices.Contains(known, first) {
				t.Fatalf("allot.PlaceKey(%q, %q) refused a key that names no other known pipeline: %v", name, key, err)
			}
			if msg := err.Error(); !strings.Contains(msg, "names pipeline "+first) || !strings.Contains(msg, "--pipeline "+first) {
				t.Fatalf("allot.PlaceKey(%q, %q): the refusal does not name pipeline %s and the fix: %v", name, key, first, err)
			}
			return
		}
		if placed != key && placed != allot.KeyPrefix(name)+key {
			t.Fatalf("allot.PlaceKey(%q, %q) = %q: neither kept nor prefixed", name, key, placed)
		}
		if !strings.HasPrefix(placed, allot.KeyPrefix(name)) {
			t.Fatalf("allot.PlaceKey(%q, %q) = %q: not under the pipeline's prefix", name, key, placed)
		}
		for _, reserved := range allot.ReservedKeyPrefixes {
			if strings.HasPrefix(placed, allot.KeyPrefix(name)+reserved) {
				t.Fatalf("allot.PlaceKey(%q, %q) = %q: under the reserved %q", name, key, placed, allot.KeyPrefix(name)+reserved)
			}
		}
		if again, err := allot.PlaceKey(name, placed, known); err != nil || again != placed {
			t.Fatalf("PlaceKey is not idempotent: allot.PlaceKey(%q) = %q, %v", placed, again, err)
		}
		if tm, ok := allot.NominalTimeOfKey(name, key); ok && placed != key {
			t.Fatalf("the Schedule's key %q (for %s) was moved to %q", key, tm, placed)
		}
		if tm, ok := allot.NominalTimeOfKey(name, placed); ok && allot.AllocationKey(name, tm) != placed {
			t.Fatalf("placed key %q carries %s but is not that time's key %q", placed, tm, allot.AllocationKey(name, tm))
		}
		for _, other := range known[1:] {
			if other == name {
				continue
			}
			if strings.HasPrefix(placed, allot.KeyPrefix(other)) {
				t.Fatalf("allot.PlaceKey(%q, %q) = %q, a key of pipeline %q", name, key, placed, other)
			}
			if tm, ok := allot.NominalTimeOfKey(other, placed); ok {
				t.Fatalf("placed key %q of %q carries %s for pipeline %q", placed, name, tm, other)
			}
		}
	})
}
