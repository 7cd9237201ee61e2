package ledger

import (
	"errors"
	"testing"
	"time"
)

// testEndedSessions: a session ended is reported ended, by every reader
// of the ledger; another is not; ending it twice changes nothing; a
// sign-out prunes the sessions expired by then and keeps the others; bad
// input writes nothing.
func testEndedSessions(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	ended := func(id string) bool {
		t.Helper()
		ok, err := l.SessionEnded(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	a := EndedSession{ID: "aaaaaaaaaaaaaaaaaaaaaa", Operator: "alice", Expires: t0.Add(12 * time.Hour)}
	if ended(a.ID) {
		t.Fatal("a session nobody ended is reported ended")
	}
	if err := l.EndSession(ctx, a, t0); err != nil {
		t.Fatal(err)
	}
	if err := l.EndSession(ctx, a, t0.Add(time.Minute)); err != nil {
		t.Fatalf("ending a session twice: %v", err)
	}
	if !ended(a.ID) || ended("bbbbbbbbbbbbbbbbbbbbbb") {
		t.Fatal("EndSession did not end exactly the session given")
	}
	// A sign-out after a's expiry prunes it; b, current, is kept.
	b := EndedSession{ID: "bbbbbbbbbbbbbbbbbbbbbb", Operator: "bob", Expires: t0.Add(36 * time.Hour)}
	if err := l.EndSession(ctx, b, t0.Add(13*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ended(a.ID) || !ended(b.ID) {
		t.Fatalf("after a sign-out past a's expiry: a ended = %v (want pruned), b ended = %v (want kept)", ended(a.ID), ended(b.ID))
	}
	var rows int
	if err := l.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM ended_sessions`).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("ended_sessions holds %d rows (%v), want b's alone", rows, err)
	}
	for name, s := range map[string]EndedSession{
		"no ID":        {Operator: "alice", Expires: t0},
		"a long ID":    {ID: string(make([]byte, 65)), Operator: "alice", Expires: t0},
		"a dotted ID":  {ID: "a.b", Operator: "alice", Expires: t0},
		"no operator":  {ID: "cccc", Expires: t0},
		"a blank name": {ID: "cccc", Operator: " ", Expires: t0},
		"no expiry":    {ID: "cccc", Operator: "alice"},
	} {
		if err := l.EndSession(ctx, s, t0); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("EndSession with %s: %v, want ErrInvalidInput", name, err)
		}
	}
	if _, err := l.SessionEnded(ctx, ""); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("SessionEnded(\"\"): %v, want ErrInvalidInput", err)
	}
	if ended("cccc") {
		t.Fatal("a refused EndSession wrote its session")
	}
}
