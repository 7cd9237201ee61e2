package ledger

import (
	"hash/fnv"
	"testing"
)

// Running workers of older builds share these advisory lock keys with
// newer ones: each stays the hash of the text it always was.
func TestAdvisoryLockKeysKeepTheirText(t *testing.T) {
	hash := func(s string) int64 {
		h := fnv.New64a()
		_, _ = h.Write([]byte(s))
		return int64(h.Sum64())
	}
	for _, c := range []struct {
		name string
		got  int64
		text string
	}{
		{"pipeline", lockKey("weekly"), "allot/ledger/pipeline/weekly"},
		{"episode", episodeLockKey("weekly", "2026-W32-0"), "allot/ledger/episode/weekly\x002026-W32-0"},
		{"budget", budgetLockKey("video-weekly", "2026-W32"), "allot/ledger/budget/video-weekly\x002026-W32"},
		{"deadline", periodLockKey("weekly", "2026-W32"), "allot/ledger/deadline/weekly\x002026-W32"},
	} {
		if c.got != hash(c.text) {
			t.Errorf("the %s lock key is no longer the hash of %q", c.name, c.text)
		}
	}
}
