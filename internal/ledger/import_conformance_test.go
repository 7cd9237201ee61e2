package ledger

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"allot"
)

// Conformance tests for Import (registered in runConformance, so both
// drivers run them). Records are built by hand here; the legacy format and
// the files are importer.Import's (internal/importer/import_test.go).

// importPlan is the plan imported episodes pin: two paid steps, a local
// one, an approval and an effect.
const importPlan = `[{"name":"video","kind":"paid"},{"name":"cover","kind":"paid"},{"name":"assemble","kind":"local"},` +
	`{"name":"approve","kind":"approval"},{"name":"publish","kind":"effect"}]`

// importKeyFor stands in for allot.IdempotencyKey.
func importKeyFor(pipeline, episodeID, step string, revision int) string {
	return fmt.Sprintf("derived/%s/%s/%s/%d", pipeline, episodeID, step, revision)
}

// importRecord is one old run as importer.Import would build it: video at
// the given revisions and cover at revision 0 succeeded (each with a cost),
// assemble completed with one output, approve approved, publish done.
func importRecord(pipeline, oldID string, nominal time.Time, videoRevisions ...int) ImportRecord {
	if len(videoRevisions) == 0 {
		videoRevisions = []int{0}
	}
	done := nominal.Add(30 * time.Hour)
	r := ImportRecord{
		OldID: oldID, Source: "/old/state.jsonl", Digest: "digest-" + oldID, Key: allot.LegacyKey(pipeline, oldID),
		Period: isoPeriod(nominal), NominalTime: nominal, Outcome: allot.OutcomeCompleted, Reason: "imported", CompletedAt: done,
	}
	for _, rev := range videoRevisions {
		r.Tasks = append(r.Tasks, ImportTask{Step: "video", Revision: rev, State: allot.PaidSucceeded,
			RemoteRef: fmt.Sprintf("vt_%s_%s_video_%d", pipeline, oldID, rev), Artifact: "/data/" + oldID + "/video.mp4",
			SHA256: "sha-video-" + oldID, Amount: 250, Currency: "USD"})
	}
	r.Tasks = append(r.Tasks,
		ImportTask{Step: "cover", State: allot.PaidSucceeded, RemoteRef: fmt.Sprintf("vt_%s_%s_cover", pipeline, oldID),
			IdempotencyKey: "given-key-" + pipeline + "-" + oldID, Artifact: "/data/" + oldID + "/cover.png", SHA256: "sha-cover-" + oldID,
			Amount: 40, Currency: "USD"},
		ImportTask{Step: "publish", State: allot.PaidSucceeded, RemoteRef: fmt.Sprintf("pub_%s_%s", pipeline, oldID)})
	r.Steps = []StepRecord{
		{Step: "assemble", Status: allot.StepCompleted, Outputs: []StepOutput{{Path: "/data/" + oldID + "/manifest.json", SHA256: "sha-manifest-" + oldID}},
			Artifact: "/data/" + oldID + "/manifest.json", SHA256: "sha-manifest-" + oldID, CompletedAt: done},
		{Step: "approve", Status: allot.StepApproved, CompletedAt: done.Add(-time.Hour)},
		{Step: "publish", Status: allot.StepCompleted, CompletedAt: done},
	}
	r.Decisions = []OperatorDecision{{RequestID: "import:" + oldID + ":approve:0", Step: "approve", Action: allot.ActionApprove,
		Reason: "by maria: on brand", At: done.Add(-time.Hour)}}
	return r
}

func isoPeriod(t time.Time) string {
	y, w := t.ISOWeek()
	return fmt.Sprintf("%04d-W%02d", y, w)
}

func importBatch(pipeline string, records ...ImportRecord) ImportBatch {
	return ImportBatch{Pipeline: pipeline, Plan: importPlan, Records: records, KeyFor: importKeyFor}
}

func mustImport(t *testing.T, l *Ledger, b ImportBatch) ImportResult {
	t.Helper()
	res, err := l.Import(ctxT(t), b)
	if err != nil {
		t.Fatalf("Import(%s, %d records): %v", b.Pipeline, len(b.Records), err)
	}
	return res
}

// conflictKinds lists an import error's conflicts as "kind old-id", sorted.
func conflictKinds(t *testing.T, err error) []string {
	t.Helper()
	var ce *ImportConflictError
	if !errors.As(err, &ce) || !errors.Is(err, ErrImportConflict) {
		t.Fatalf("got %v, want an *ImportConflictError", err)
	}
	var out []string
	for _, c := range ce.Conflicts {
		out = append(out, c.Kind+" "+c.OldID)
		if !strings.Contains(err.Error(), c.Detail) {
			t.Errorf("the error does not list conflict %v: %s", c, err)
		}
	}
	sort.Strings(out)
	return out
}

var (
	w31Mon = time.Date(2026, 7, 27, 2, 0, 0, 0, time.UTC)
	w31Thu = time.Date(2026, 7, 30, 2, 0, 0, 0, time.UTC)
	w32Mon = time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC)
	w32Wed = time.Date(2026, 8, 5, 2, 0, 0, 0, time.UTC)
)

func testImportCreatesEpisodes(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	// 2026-W32 already holds one episode: the imported ones come after it.
	existing := alloc(t, l, "weekly", "weekly/scheduled-x", "2026-W32", 0).Episode
	other := alloc(t, l, "other", "other/k", "2026-W31", 0).Episode

	// Out of order in the source: sequences follow the nominal times.
	b := importBatch("weekly",
		importRecord("weekly", "2026-W32b", w32Wed),
		importRecord("weekly", "2026-W31", w31Mon, 0, 1),
		importRecord("weekly", "2026-W32a", w32Mon),
		importRecord("weekly", "2026-W31x", w31Thu))
	at := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
	b.At = at

	dry := b
	dry.DryRun = true
	before := dumpTables(t, l)
	planned := mustImport(t, l, dry)
	mustBeUnchanged(t, l, "a dry-run import", before)

	res := mustImport(t, l, b)
	want := map[string]string{"2026-W32b": "2026-W32-2", "2026-W31": "2026-W31-0", "2026-W32a": "2026-W32-1", "2026-W31x": "2026-W31-1"}
	if len(res.Episodes) != 4 || len(planned.Episodes) != 4 || !planned.DryRun || res.DryRun {
		t.Fatalf("import: %+v, dry run %+v", res, planned)
	}
	for i, ep := range res.Episodes {
		if ep.EpisodeID != want[ep.OldID] || ep.Skipped || planned.Episodes[i].EpisodeID != ep.EpisodeID || ep.AllocationKey != "weekly/legacy/"+ep.OldID {
			t.Errorf("old ID %s became %+v (planned %+v), want episode %s with key weekly/legacy/%s", ep.OldID, ep, planned.Episodes[i], want[ep.OldID], ep.OldID)
		}
	}

	ep := mustEpisode(t, l, "weekly", "2026-W31-0")
	if ep.Status != EpisodeCompleted || !ep.CompletedAt.Equal(w31Mon.Add(30*time.Hour)) || ep.Outcome != "completed" ||
		ep.OutcomeReason != "imported" || !ep.NominalTime.Equal(w31Mon) || ep.AllocationKey != "weekly/legacy/2026-W31" || !ep.CreatedAt.Equal(at) {
		t.Fatalf("imported episode %+v", ep)
	}
	if plan, err := l.EpisodePlan(ctx, "weekly", ep.ID); err != nil || plan != importPlan {
		t.Fatalf("pinned plan %q, %v", plan, err)
	}
	tasks, err := l.PaidTasks(ctx, "weekly", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, pt := range tasks {
		got = append(got, fmt.Sprintf("%s/%d %s %s %s", pt.Step, pt.Revision, pt.State, pt.RemoteRef, pt.IdempotencyKey))
	}
	wantTasks := []string{
		"cover/0 succeeded vt_weekly_2026-W31_cover given-key-weekly-2026-W31",
		"publish/0 succeeded pub_weekly_2026-W31 derived/weekly/2026-W31-0/publish/0",
		"video/0 succeeded vt_weekly_2026-W31_video_0 derived/weekly/2026-W31-0/video/0",
		"video/1 succeeded vt_weekly_2026-W31_video_1 derived/weekly/2026-W31-0/video/1",
	}
	if !slices.Equal(got, wantTasks) {
		t.Fatalf("paid tasks\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(wantTasks, "\n  "))
	}
	costs := mustCosts(t, l, "weekly", "2026-W31")
	if len(costs) != 5 || costTotal(costs) != 250*3+40*2 {
		t.Fatalf("costs of 2026-W31: %+v, want 5 entries totalling %d", costs, 250*3+40*2)
	}
	steps, err := l.Steps(ctx, "weekly", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st := stepStatuses(t, l, ep); st["assemble"] != allot.StepCompleted || st["approve"] != allot.StepApproved || st["publish"] != allot.StepCompleted || len(steps) != 3 {
		t.Fatalf("step records %+v", steps)
	}
	ds, err := l.Decisions(ctx, "weekly", ep.ID)
	if err != nil || len(ds) != 1 || ds[0].Action != allot.ActionApprove || ds[0].RequestID != "import:2026-W31:approve:0" || ds[0].Reason != "by maria: on brand" {
		t.Fatalf("decisions %+v, %v", ds, err)
	}
	metas, err := l.Imports(ctx, "weekly")
	if err != nil || len(metas) != 4 {
		t.Fatalf("imports %+v, %v", metas, err)
	}
	if m := metas[0]; m.OldID != "2026-W31" || m.EpisodeID != "2026-W31-0" || m.Source != "/old/state.jsonl" || m.Digest != "digest-2026-W31" || !m.ImportedAt.Equal(at) {
		t.Fatalf("metadata %+v", m)
	}
	// Untouched: the existing episodes, the other pipeline.
	if e := mustEpisode(t, l, "weekly", existing.ID); e.Sequence != 0 || e.AllocationKey != existing.AllocationKey {
		t.Fatalf("existing episode changed: %+v", e)
	}
	if eps, _ := l.ListEpisodes(ctx, "other", ""); len(eps) != 1 || eps[0].ID != other.ID {
		t.Fatalf("other pipeline: %+v", eps)
	}
	mustCheckClean(t, l, "")
	audit, err := l.Audit(ctx, AuditOptions{Pipeline: "weekly"})
	if err != nil || len(audit.Violations) != 0 {
		t.Fatalf("audit after import: %v, %v", audit.Violations, err)
	}

	// Again: every record is skipped and nothing changes.
	before = dumpTables(t, l)
	again := mustImport(t, l, importBatch("weekly", b.Records...))
	mustBeUnchanged(t, l, "importing the same records again", before)
	for _, e := range again.Episodes {
		if !e.Skipped || e.EpisodeID != want[e.OldID] {
			t.Errorf("second import of %s: %+v, want skipped as %s", e.OldID, e, want[e.OldID])
		}
	}
	// A new record with the old ones: only it is imported, after them.
	more := mustImport(t, l, importBatch("weekly", append(slices.Clone(b.Records), importRecord("weekly", "2026-W32c", w32Mon))...))
	if last := more.Episodes[4]; last.EpisodeID != "2026-W32-3" || last.Skipped {
		t.Fatalf("a record added later: %+v, want 2026-W32-3", last)
	}
}

func testImportConflicts(t *testing.T, l *Ledger) {
	// The ledger holds: an imported old run, an allocated episode with a
	// paid task, a cost entry, and an episode bound to a legacy key by a run.
	mustImport(t, l, importBatch("weekly", importRecord("weekly", "done", w31Mon)))
	ep := alloc(t, l, "weekly", "weekly/scheduled-a", "2026-W32", 0).Episode
	ref := paidRef(ep, "video", 0)
	mustIntent(t, l, ref)
	mustSubmit(t, l, ref, "vt_taken", 250)
	alloc(t, l, "weekly", "weekly/legacy/run-by-hand", "2026-W32", 0)

	changed := importRecord("weekly", "done", w31Mon)
	changed.Digest = "digest-other"
	refOwned := importRecord("weekly", "ref-owned", w32Mon)
	refOwned.Tasks[0].RemoteRef = "vt_taken"
	keyBound := importRecord("weekly", "key-bound", w32Mon)
	keyBound.Tasks[1].IdempotencyKey = testKey(ref)
	dupA := importRecord("weekly", "dup-a", w32Mon)
	dupB := importRecord("weekly", "dup-b", w32Wed)
	dupB.Tasks[0].RemoteRef = dupA.Tasks[0].RemoteRef
	b := importBatch("weekly", changed, refOwned, keyBound, dupA, dupB,
		importRecord("weekly", "run-by-hand", w32Mon), importRecord("weekly", "dup-a", w32Wed), importRecord("weekly", "fine", w32Mon))

	wantKinds := []string{
		"duplicate dup-a", "duplicate dup-b", "key_bound key-bound", "key_bound run-by-hand",
		"old_id_changed done", "reference_owned ref-owned",
	}
	before := dumpTables(t, l)
	for _, dry := range []bool{true, false} {
		b.DryRun = dry
		_, err := l.Import(ctxT(t), b)
		if got := conflictKinds(t, err); !slices.Equal(got, wantKinds) {
			t.Errorf("dry run %v: conflicts\n  %s\nwant\n  %s", dry, strings.Join(got, "\n  "), strings.Join(wantKinds, "\n  "))
		}
		mustBeUnchanged(t, l, fmt.Sprintf("a refused import (dry run %v)", dry), before)
	}
	if metas, _ := l.Imports(ctxT(t), "weekly"); len(metas) != 1 {
		t.Fatalf("a refused import left metadata: %+v", metas)
	}
}

func testImportMoved(t *testing.T, l *Ledger) {
	b := importBatch("weekly", importRecord("weekly", "a", w32Mon))
	b.DryRun = true
	planned := mustImport(t, l, b)
	// A run allocates in the period between the plan and the import.
	alloc(t, l, "weekly", "weekly/scheduled-x", "2026-W32", 0)
	b.DryRun = false
	b.Records[0].EpisodeID = planned.Episodes[0].EpisodeID
	before := dumpTables(t, l)
	_, err := l.Import(ctxT(t), b)
	wantErr(t, "import after the period changed", err, ErrImportMoved, "2026-W32-0", "2026-W32-1", "run the import again")
	mustBeUnchanged(t, l, "an import whose plan moved", before)
	// Planned again, it goes through.
	b.Records[0].EpisodeID = "2026-W32-1"
	if res := mustImport(t, l, b); res.Episodes[0].EpisodeID != "2026-W32-1" {
		t.Fatalf("import after re-planning: %+v", res)
	}
}

func testImportInvalid(t *testing.T, l *Ledger) {
	ok := importRecord("weekly", "a", w32Mon)
	noRef := importRecord("weekly", "a", w32Mon)
	noRef.Tasks[0].RemoteRef = ""
	twice := importRecord("weekly", "a", w32Mon)
	twice.Tasks = append(twice.Tasks, twice.Tasks[0])
	open := importRecord("weekly", "a", w32Mon)
	open.Outcome = allot.OutcomeRunning
	noKeyFor := importBatch("weekly", ok)
	noKeyFor.KeyFor = nil
	before := dumpTables(t, l)
	for name, b := range map[string]ImportBatch{
		"no pipeline":           {Plan: importPlan, Records: []ImportRecord{ok}, KeyFor: importKeyFor},
		"no plan":               {Pipeline: "weekly", Records: []ImportRecord{ok}, KeyFor: importKeyFor},
		"succeeded without ref": importBatch("weekly", noRef),
		"a task twice":          importBatch("weekly", twice),
		"running":               importBatch("weekly", open),
		"no key derivation":     noKeyFor,
	} {
		if _, err := l.Import(ctxT(t), b); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%s: got %v, want ErrInvalidInput", name, err)
		}
	}
	mustBeUnchanged(t, l, "invalid imports", before)
}

// testImportThenRework: an imported episode is complete, and a rework of
// one of its paid steps plans the revision after the highest imported one
// under the normal protocol.
func testImportThenRework(t *testing.T, l *Ledger) {
	res := mustImport(t, l, importBatch("weekly", importRecord("weekly", "2026-W31", w31Mon, 0, 1)))
	ep := mustEpisode(t, l, "weekly", res.Episodes[0].EpisodeID)
	video := mustRework(t, l, ep, "video", "rework-video")
	cover := mustRework(t, l, ep, "cover", "rework-cover")
	if video.Revision != 2 || cover.Revision != 1 {
		t.Fatalf("reworks planned video revision %d and cover revision %d, want 2 and 1", video.Revision, cover.Revision)
	}
	// The new revision runs the protocol: intent with its own key, then
	// the vendor's reference and cost.
	r := paidRef(ep, "video", 2)
	mustIntent(t, l, r)
	mustSubmit(t, l, r, "vt_rework", 300)
	mustResult(t, l, r, "vt_rework")
	if d, applied, err := l.Decide(ctxT(t), reworkReq(ep, "video", "rework-video")); err != nil || applied || d.Revision != 2 {
		t.Fatalf("the same rework request again: %+v, applied %v, %v", d, applied, err)
	}
	mustCheckClean(t, l, "weekly")
}

// scheduledRecord is importRecord as its pipeline's scheduled run: bound to
// the key of its nominal time.
func scheduledRecord(pipeline, oldID string, nominal time.Time) ImportRecord {
	r := importRecord(pipeline, oldID, nominal)
	r.Scheduled, r.Key = true, allot.AllocationKey(pipeline, nominal)
	return r
}

// testImportOwnsItsTimes: an imported scheduled run binds its nominal
// time's key, so a run for that time gets the imported episode back and
// allocates nothing; a record that was not a scheduled run keeps its legacy
// key and binds no time. A time claimed twice, or one a run already has, is
// a conflict that says to mark the extra runs as not scheduled.
func testImportOwnsItsTimes(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	res := mustImport(t, l, importBatch("weekly",
		scheduledRecord("weekly", "2026-W31", w31Mon),
		importRecord("weekly", "2026-W31-extra", w31Mon))) // an extra run at the same time
	sched, extra := res.Episodes[0], res.Episodes[1]
	if sched.AllocationKey != allot.AllocationKey("weekly", w31Mon) || !sched.Scheduled ||
		extra.AllocationKey != allot.LegacyKey("weekly", "2026-W31-extra") || extra.Scheduled {
		t.Fatalf("imported %+v and %+v: want the first bound to its time's key, the second to its legacy key", sched, extra)
	}
	metas, err := l.Imports(ctx, "weekly")
	if err != nil || len(metas) != 2 || !metas[0].Scheduled || metas[1].Scheduled || metas[0].OverCap || metas[1].OverCap {
		t.Fatalf("metadata %+v, %v: want 2026-W31 scheduled, the extra run not", metas, err)
	}

	// A run for the imported time (starter run, a backfill, the Schedule):
	// the imported episode, nothing written.
	before := dumpTables(t, l)
	run, err := l.Allocate(ctx, AllocateInput{Pipeline: "weekly", Key: allot.AllocationKey("weekly", w31Mon), Period: isoPeriod(w31Mon),
		NominalTime: w31Mon, RunID: "run-after-import", MaxPerPeriod: 5})
	if err != nil || run.Decision != DecisionReused || run.Reason != ReasonKeyBound || run.Episode.ID != sched.EpisodeID {
		t.Fatalf("a run for the imported time: %+v, %v; want episode %s reused", run, err, sched.EpisodeID)
	}
	mustBeUnchanged(t, l, "a run for an imported time", before)
	if a, err := l.Audit(ctx, AuditOptions{Pipeline: "weekly", Now: auditLater()}); err != nil || len(a.Violations) != 0 {
		t.Fatalf("audit: %v, %v", a.Violations, err)
	}

	// A time already imported, a time a run already has, a time twice in
	// the batch.
	alloc(t, l, "weekly", allot.AllocationKey("weekly", w32Wed), "2026-W32", 0)
	b := importBatch("weekly",
		scheduledRecord("weekly", "again", w31Mon),
		scheduledRecord("weekly", "ran", w32Wed),
		scheduledRecord("weekly", "dup-a", w32Mon),
		scheduledRecord("weekly", "dup-b", w32Mon),
		importRecord("weekly", "dup-c", w32Mon)) // not scheduled: no claim on the time
	before = dumpTables(t, l)
	for _, dry := range []bool{true, false} {
		b.DryRun = dry
		_, err := l.Import(ctx, b)
		want := []string{"duplicate dup-b", "key_bound again", "key_bound ran"}
		if got := conflictKinds(t, err); !slices.Equal(got, want) {
			t.Fatalf("dry run %v: conflicts %v, want %v", dry, got, want)
		}
		var ce *ImportConflictError
		errors.As(err, &ce)
		for _, c := range ce.Conflicts {
			if !strings.Contains(c.Detail, `"scheduled": false`) {
				t.Errorf("conflict %v does not say to mark the extra run as not scheduled", c)
			}
		}
		mustBeUnchanged(t, l, "a refused import", before)
	}
}

// testImportOverCap: an import that would put more episodes in a period
// than the pipeline's cap is refused, naming the period and the old IDs
// beyond it, unless OverCap; then those are imported and their metadata
// says so.
func testImportOverCap(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	alloc(t, l, "weekly", "weekly/scheduled-run", "2026-W32", 0) // a run this week
	b := importBatch("weekly",
		scheduledRecord("weekly", "w32b", w32Wed),
		scheduledRecord("weekly", "w32a", w32Mon),
		scheduledRecord("weekly", "w31", w31Mon))
	b.MaxPerPeriod = 2
	before := dumpTables(t, l)
	for _, dry := range []bool{true, false} {
		b.DryRun = dry
		_, err := l.Import(ctx, b)
		if got := conflictKinds(t, err); !slices.Equal(got, []string{"over_cap "}) {
			t.Fatalf("dry run %v: conflicts %v, want one over_cap", dry, got)
		}
		// 2026-W32: the run's episode and w32a fit, w32b (later) does not.
		for _, part := range []string{"2026-W32", "3 episodes", "cap of 2", "w32b", "--over-cap"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("the refusal does not name %q: %v", part, err)
			}
		}
		if strings.Contains(err.Error(), "w32a") || strings.Contains(err.Error(), "2026-W31") {
			t.Errorf("the refusal names records within the cap: %v", err)
		}
		mustBeUnchanged(t, l, "an import over the cap", before)
	}
	if metas, _ := l.Imports(ctx, "weekly"); len(metas) != 0 {
		t.Fatalf("a refused import left metadata %+v", metas)
	}

	b.DryRun, b.OverCap = false, true
	res := mustImport(t, l, b)
	over := map[string]bool{}
	for _, ep := range res.Episodes {
		over[ep.OldID] = ep.OverCap
	}
	if !over["w32b"] || over["w32a"] || over["w31"] {
		t.Fatalf("imported with OverCap: %+v; want only w32b over the cap", res.Episodes)
	}
	metas, err := l.Imports(ctx, "weekly")
	if err != nil || len(metas) != 3 {
		t.Fatalf("metadata %+v, %v", metas, err)
	}
	for _, m := range metas {
		if m.OverCap != over[m.OldID] {
			t.Errorf("metadata of %s: over cap %v, want %v", m.OldID, m.OverCap, over[m.OldID])
		}
	}
	// Again, without OverCap: skipped, and the result still says which
	// one is over the cap.
	b.OverCap = false
	for _, ep := range mustImport(t, l, b).Episodes {
		if !ep.Skipped || ep.OverCap != over[ep.OldID] {
			t.Errorf("second import of %s: %+v", ep.OldID, ep)
		}
	}
}

// testImportRefusesTheImpossible: what the old system could not have done
// is invalid input, and nothing is written: a completion or a decision
// before the nominal time, a cost above the bound, a key that is not the
// record's.
func testImportRefusesTheImpossible(t *testing.T, l *Ledger) {
	early := importRecord("weekly", "a", w32Mon)
	early.CompletedAt = w32Mon.Add(-time.Second)
	decidedEarly := importRecord("weekly", "a", w32Mon)
	decidedEarly.Decisions[0].At = w32Mon.Add(-time.Minute)
	absurd := importRecord("weekly", "a", w32Mon)
	absurd.Tasks[0].Amount = allot.MaxAmount + 1
	schedLegacy := importRecord("weekly", "a", w32Mon)
	schedLegacy.Scheduled = true
	legacySched := scheduledRecord("weekly", "a", w32Mon)
	legacySched.Scheduled = false
	negCap := importBatch("weekly", importRecord("weekly", "a", w32Mon))
	negCap.MaxPerPeriod = -1
	before := dumpTables(t, l)
	for name, tc := range map[string]struct {
		b     ImportBatch
		parts []string
	}{
		"completed before nominal": {importBatch("weekly", early), []string{"2026-08-03T01:59:59Z", "2026-08-03T02:00:00Z"}},
		"decided before nominal":   {importBatch("weekly", decidedEarly), []string{"2026-08-03T01:59:00Z", "2026-08-03T02:00:00Z"}},
		"cost above the bound":     {importBatch("weekly", absurd), []string{"10000000000.01 USD", "10000000000.00 USD"}},
		"scheduled, legacy key":    {importBatch("weekly", schedLegacy), []string{"weekly/scheduled-2026-08-03T02:00:00Z"}},
		"not scheduled, time key":  {importBatch("weekly", legacySched), []string{"weekly/legacy/a"}},
		"negative cap":             {negCap, nil},
	} {
		_, err := l.Import(ctxT(t), tc.b)
		wantErr(t, name, err, ErrInvalidInput, tc.parts...)
	}
	mustBeUnchanged(t, l, "impossible imports", before)
	// The bound itself is a cost.
	ok := importRecord("weekly", "a", w32Mon)
	ok.Tasks[0].Amount = allot.MaxAmount
	ok.CompletedAt = w32Mon
	mustImport(t, l, importBatch("weekly", ok))
}

// testMigrateV9ToV10: episodes imported before v10 (legacy keys only) are
// rebound to their nominal time's scheduled key where that is safe; where
// a run already holds the key, or other imported runs share the time, they
// keep the legacy key and the audit says why, naming the episodes.
func testMigrateV9ToV10(t *testing.T, url string) {
	v9 := ledgerAtVersion(t, url, 9)
	type old struct {
		id, oldID string
		nominal   time.Time
	}
	half := w31Thu.Add(500 * time.Millisecond)
	olds := []old{
		{"2026-W31-0", "alone", w31Mon},                                      // rebound
		{"2026-W31-1", "twin-a", half},                                       // shares its second with twin-b: kept
		{"2026-W31-2", "twin-b", w31Thu},                                     // kept
		{"2026-W32-0", "run-took-it", w32Mon},                                // a run allocated its time after the import: kept
		{"2026-W32-2", "alone-fraction", w32Wed.Add(250 * time.Millisecond)}, // rebound, to the second
	}
	for i, o := range olds {
		seq := map[int]int{0: 0, 1: 1, 2: 2, 3: 0, 4: 2}[i]
		rawExec(t, v9, `INSERT INTO episodes (pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at, status, outcome, outcome_reason)
			VALUES ('weekly', ?, ?, ?, ?, ?, ?, 'completed', 'completed', 'imported')`,
			o.id, isoPeriod(o.nominal), seq, allot.LegacyKey("weekly", o.oldID), v9.d.timeArg(o.nominal), v9.d.timeArg(t0))
		rawExec(t, v9, `INSERT INTO imports (pipeline, old_id, episode_id, source, digest, imported_at) VALUES ('weekly', ?, ?, 'old.jsonl', ?, ?)`,
			o.oldID, o.id, "digest-"+o.oldID, v9.d.timeArg(t0))
	}
	// The run that took run-took-it's time, and one under a legacy-looking
	// key that was never imported.
	rawExec(t, v9, `INSERT INTO episodes (pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at, status)
		VALUES ('weekly', '2026-W32-1', '2026-W32', 1, ?, ?, ?, 'allocated')`, allot.AllocationKey("weekly", w32Mon), v9.d.timeArg(w32Mon), v9.d.timeArg(t0))
	rawExec(t, v9, `INSERT INTO episodes (pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at, status)
		VALUES ('weekly', '2026-W33-0', '2026-W33', 0, ?, ?, ?, 'allocated')`, allot.LegacyKey("weekly", "by-hand"), v9.d.timeArg(w32Mon.AddDate(0, 0, 7)), v9.d.timeArg(t0))
	if err := v9.Close(); err != nil {
		t.Fatal(err)
	}

	l := openURLT(t, url)
	mustBeAtLatestVersion(t, l)
	want := map[string]string{
		"2026-W31-0": allot.AllocationKey("weekly", w31Mon),
		"2026-W31-1": allot.LegacyKey("weekly", "twin-a"),
		"2026-W31-2": allot.LegacyKey("weekly", "twin-b"),
		"2026-W32-0": allot.LegacyKey("weekly", "run-took-it"),
		"2026-W32-1": allot.AllocationKey("weekly", w32Mon),
		"2026-W32-2": "weekly/scheduled-2026-08-05T02:00:00Z",
		"2026-W33-0": allot.LegacyKey("weekly", "by-hand"),
	}
	eps, err := l.ListEpisodes(ctxT(t), "weekly", "")
	if err != nil || len(eps) != len(want) {
		t.Fatalf("episodes after the migration: %+v, %v", eps, err)
	}
	for _, ep := range eps {
		if ep.AllocationKey != want[ep.ID] {
			t.Errorf("episode %s has key %q after the migration, want %q", ep.ID, ep.AllocationKey, want[ep.ID])
		}
	}
	metas, err := l.Imports(ctxT(t), "weekly")
	if err != nil || len(metas) != len(olds) {
		t.Fatalf("imports after the migration: %+v, %v", metas, err)
	}
	for _, m := range metas {
		if !m.Scheduled || m.OverCap {
			t.Errorf("import %s after the migration: scheduled %v, over cap %v; want a scheduled run within the cap", m.OldID, m.Scheduled, m.OverCap)
		}
	}
	// A run for a rebound time gets its imported episode.
	res, err := l.Allocate(ctxT(t), AllocateInput{Pipeline: "weekly", Key: allot.AllocationKey("weekly", w31Mon), Period: "2026-W31", NominalTime: w31Mon, RunID: "r"})
	if err != nil || res.Decision != DecisionReused || res.Episode.ID != "2026-W31-0" {
		t.Fatalf("a run for a rebound time: %+v, %v", res, err)
	}
	// What stayed is reported, each with what to look at.
	a, err := l.Audit(ctxT(t), AuditOptions{Pipeline: "weekly", Now: auditLater()})
	if err != nil {
		t.Fatal(err)
	}
	details := map[string]string{}
	for _, v := range a.Violations {
		if v.Kind == KindImportKey {
			details[v.Episode] = v.Detail
		}
	}
	for id, parts := range map[string][]string{
		"2026-W31-1": {"twin-a, twin-b", "pays again"},
		"2026-W31-2": {"twin-a, twin-b", "pays again"},
		"2026-W32-0": {"episode 2026-W32-1 now holds", "starter episode show --pipeline weekly --episode 2026-W32-1", "second charge"},
	} {
		for _, p := range parts {
			if !strings.Contains(details[id], p) {
				t.Errorf("import_key of %s does not name %q: %q", id, p, details[id])
			}
		}
	}
	if len(details) != 3 {
		t.Errorf("import_key violations %v, want the 3 kept episodes", details)
	}
}
