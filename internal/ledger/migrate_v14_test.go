package ledger

import (
	"testing"
	"time"
)

// Migration 0014 (first_sent_at): a task that may have been sent before
// the column existed counts its horizon from its creation, as it did; a
// task never sent has no first send.

func TestSQLiteMigrateV12ToV13FirstSent(t *testing.T) { testMigrateV12ToV13(t, newSQLiteURL(t)) }

func TestPostgresMigrateV12ToV13FirstSent(t *testing.T) {
	postgresDSN(t)
	testMigrateV12ToV13(t, newPostgresURL(t))
}

func testMigrateV12ToV13(t *testing.T, url string) {
	v12 := ledgerAtVersion(t, url, 12)
	rawInsertEpisode(t, v12, "weekly", "2026-W32-0", "2026-W32", 0, "weekly/k")
	created := t0.Add(-72 * time.Hour)
	insert := func(step, state, ref string, maybeSent bool, sendingUntil time.Time) {
		rawExec(t, v12, `INSERT INTO paid_tasks (pipeline, episode_id, step, revision, idempotency_key, state, remote_ref, maybe_sent, sending_until, created_at, updated_at)
			VALUES ('weekly', '2026-W32-0', ?, 0, ?, ?, ?, ?, ?, ?, ?)`,
			step, "key-"+step, state, ref, maybeSent, v12.d.timeArg(sendingUntil), v12.d.timeArg(created), v12.d.timeArg(t0))
	}
	insert("unsent", "intent", "", false, time.Time{})
	insert("planned", "planned", "", false, time.Time{})
	insert("maybe", "intent", "", true, t0)
	insert("released", "planned", "", false, t0) // sent, refused, cleared
	insert("done", "succeeded", "vt_done", false, time.Time{})
	if err := v12.Close(); err != nil {
		t.Fatal(err)
	}
	l := openURLT(t, url)
	mustBeAtLatestVersion(t, l)
	for step, sent := range map[string]bool{"unsent": false, "planned": false, "maybe": true, "released": true, "done": true} {
		got, err := l.PaidTask(ctxT(t), PaidTaskRef{Pipeline: "weekly", EpisodeID: "2026-W32-0", Step: step})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]time.Time{true: created}[sent]; !got.FirstSentAt.Equal(want) {
			t.Errorf("task %s after 0014: first sent %v, want %v", step, got.FirstSentAt, want)
		}
	}
}
