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
// the files are operator.Import's (operator/import_test.go).

// importPlan is the plan imported episodes pin: two paid steps, a local
// one, an approval and an effect.
const importPlan = `[{"name":"video","kind":"paid"},{"name":"cover","kind":"paid"},{"name":"assemble","kind":"local"},` +
	`{"name":"approve","kind":"approval"},{"name":"publish","kind":"effect"}]`

// importKeyFor stands in for paidvendor.IdempotencyKey.
func importKeyFor(pipeline, episodeID, step string, revision int) string {
	return fmt.Sprintf("derived/%s/%s/%s/%d", pipeline, episodeID, step, revision)
}

// importRecord is one old run as operator.Import would build it: video at
// the given revisions and cover at revision 0 succeeded (each with a cost),
// assemble completed with one output, approve approved, publish done.
func importRecord(pipeline, oldID string, nominal time.Time, videoRevisions ...int) ImportRecord {
	if len(videoRevisions) == 0 {
		videoRevisions = []int{0}
	}
	done := nominal.Add(30 * time.Hour)
	r := ImportRecord{
		OldID: oldID, Source: "/old/state.jsonl", Digest: "digest-" + oldID, Key: LegacyKey(pipeline, oldID),
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
