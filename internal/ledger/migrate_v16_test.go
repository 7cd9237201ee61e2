package ledger

import (
	"testing"
	"time"

	"allot"
)

// Migration 0016 (decided_by): decisions recorded before it read with no
// actor, and new ones keep theirs.

func TestSQLiteMigrateV15ToV16DecidedBy(t *testing.T) { testMigrateV15ToV16(t, newSQLiteURL(t)) }

func TestPostgresMigrateV15ToV16DecidedBy(t *testing.T) {
	postgresDSN(t)
	testMigrateV15ToV16(t, newPostgresURL(t))
}

func testMigrateV15ToV16(t *testing.T, url string) {
	v15 := ledgerAtVersion(t, url, 15)
	rawInsertEpisode(t, v15, "weekly", "2026-W32-0", "2026-W32", 0, "weekly/k")
	rawExec(t, v15, `INSERT INTO operator_decisions (request_id, pipeline, episode_id, step, revision, action, remote_ref, reason, decided_at)
		VALUES ('old-1', 'weekly', '2026-W32-0', 'approval', 0, 'approve', '', 'before v16', ?)`, v15.d.timeArg(t0))
	if err := v15.Close(); err != nil {
		t.Fatal(err)
	}
	l := openURLT(t, url)
	mustBeAtLatestVersion(t, l)
	ep, err := l.Episode(ctxT(t), "weekly", "2026-W32-0")
	if err != nil {
		t.Fatal(err)
	}
	rj := decision(ep, "new-1", allot.ActionReject, "approval")
	rj.By, rj.At = "alice", t0.Add(time.Hour)
	mustDecide(t, l, rj)
	ds, err := l.Decisions(ctxT(t), "weekly", "2026-W32-0")
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].RequestID != "old-1" || ds[0].By != "" || ds[0].Reason != "before v16" || ds[1].By != "alice" {
		t.Fatalf("decisions after 0016: %+v; want old-1 by nobody, new-1 by alice", ds)
	}
}
