package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
)

// The Temporal-only allocator is only worth comparing if it is right: dense
// sequences per period under concurrent callers, a bound key gets its
// episode back, a key asked in another period is refused, and nothing is
// lost across continue-as-new (more updates than one run takes).
func TestTemporalAllocatorIsCorrect(t *testing.T) {
	st := startTemporal(t, storeMemory)
	startAllocatorWorker(t, st)
	const id = "allocator/correctness"
	startAllocator(t, st.Client, id, allocState{})
	ctx := context.Background()

	const keys, callers = allocatorUpdatesPerRun + 100, 8
	got := make([]string, keys)
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < keys; i += callers {
				r, err := allocateByUpdate(ctx, st.Client, id, allocRequest{Key: fmt.Sprint("key-", i), Period: fmt.Sprint("P", i%3)})
				if err != nil {
					errs <- fmt.Errorf("key-%d: %w", i, err)
					return
				}
				got[i] = r.EpisodeID
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	byPeriod := map[string][]int{}
	for i, ep := range got {
		var p string
		var seq int
		if _, err := fmt.Sscanf(ep, "P%1s-%d", &p, &seq); err != nil || "P"+p != fmt.Sprint("P", i%3) {
			t.Fatalf("key-%d got episode %q", i, ep)
		}
		byPeriod[p] = append(byPeriod[p], seq)
	}
	for p, seqs := range byPeriod {
		sort.Ints(seqs)
		for i, s := range seqs {
			if s != i {
				t.Fatalf("period P%s: sequences %v are not 0..%d", p, seqs, len(seqs)-1)
			}
		}
	}
	// After continue-as-new: a bound key is reused, another period refused.
	r, err := allocateByUpdate(ctx, st.Client, id, allocRequest{Key: "key-0", Period: "P0"})
	if err != nil || r.EpisodeID != got[0] || r.Decision != "reused" {
		t.Fatalf("key-0 again: %+v, %v; want %s reused", r, err, got[0])
	}
	if _, err := allocateByUpdate(ctx, st.Client, id, allocRequest{Key: "key-0", Period: "P1"}); err == nil {
		t.Fatal("key-0 in another period was allocated")
	}
	if _, _, runs := allocatorSize(t, st, id); runs < 2 {
		t.Fatalf("the allocator has %d runs after %d updates, want a continue-as-new", runs, keys)
	}
}
