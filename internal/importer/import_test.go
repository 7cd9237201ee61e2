package importer

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/artifacts"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/internal/report"
	"allot/pipeline"
)

const exampleLines = "../../examples/import/weekly-video.jsonl"

// importPipelines is weekly-video with its cover made by the named vendor
// "studio".
const importPipelines = `
[[vendor]]
name        = "studio"
url         = "http://studio.invalid"
api_key_env = "STUDIO_API_KEY"

[[pipeline]]
name = "weekly-video"

  [[pipeline.step]]
  name = "video"
  kind = "paid"

  [[pipeline.step]]
  name   = "cover"
  kind   = "paid"
  vendor = "studio"

  [[pipeline.step]]
  name = "assemble"
  kind = "local"

  [[pipeline.step]]
  name = "approve"
  kind = "approval"

  [[pipeline.step]]
  name = "publish"
  kind = "local"
`

func importSet(t *testing.T) *pipeline.Set {
	t.Helper()
	set, err := pipeline.Parse([]byte(importPipelines), "test")
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// hashTree hashes every file under dir, by path relative to it.
func hashTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		sum, err := artifacts.SHA256File(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dir, path)
		out[rel] = sum
		return nil
	})
	return out
}

func conflictList(err error) []string {
	var ce *ledger.ImportConflictError
	if !errors.As(err, &ce) {
		return []string{"not a conflict: " + err.Error()}
	}
	var out []string
	for _, c := range ce.Conflicts {
		out = append(out, c.Kind+" "+c.OldID)
	}
	slices.Sort(out)
	return out
}

// TestImportInPlaceRecordsTheSourceFiles: --in-place copies nothing and
// the ledger names the source's files; check passes.
func TestImportInPlaceRecordsTheSourceFiles(t *testing.T) {
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			url := ledgertest.DriverURL(t, driver)
			if url == "" {
				t.Skip("ALLOT_TEST_POSTGRES_DSN is not set")
			}
			led := ledgertest.Open(t, url)
			ctx := context.Background()
			data := t.TempDir()
			res, err := Import(ctx, led, importSet(t), ImportInput{Pipeline: "weekly-video", From: exampleLines, InPlace: true, DataDir: data})
			if err != nil || !res.OK || len(res.Imported) != 3 || res.Artifacts != 8 {
				t.Fatalf("import in place: %+v, %v", res, err)
			}
			if files := hashTree(t, data); len(files) != 0 {
				t.Fatalf("an import in place copied %v", files)
			}
			src, _ := filepath.Abs("../../examples/import/runs/2026-W30/video-take2.mp4")
			video, err := led.PaidTask(ctx, ledger.PaidTaskRef{Pipeline: "weekly-video", EpisodeID: "2026-W30-0", Step: "video", Revision: 1})
			if err != nil || video.Artifact != src || video.RemoteRef != "vt_30a0c1d2e3f40011" {
				t.Fatalf("video revision 1: %+v, %v; want its artifact at %s", video, err, src)
			}
			if check, err := report.Check(ctx, led, ""); err != nil || !check.OK || check.Artifacts != 8 {
				t.Fatalf("check after an import in place: %+v, %v", check, err)
			}
		})
	}
}

// TestImportRefusesAndWritesNothing: every conflict of the source with
// itself, its files, the data folder and the ledger is listed, and neither
// the ledger nor the data folder changes.
func TestImportRefusesAndWritesNothing(t *testing.T) {
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			url := ledgertest.DriverURL(t, driver)
			if url == "" {
				t.Skip("ALLOT_TEST_POSTGRES_DSN is not set")
			}
			led := ledgertest.Open(t, url)
			ctx := context.Background()
			data := t.TempDir()
			set := importSet(t)
			if _, err := Import(ctx, led, set, ImportInput{Pipeline: "weekly-video", From: exampleLines, DataDir: data}); err != nil {
				t.Fatal(err)
			}
			// A stray file where a new episode's artifact would go.
			stray := filepath.Join(data, "artifacts", "weekly-video", "2026-W33-0", "notes.txt")
			if err := os.MkdirAll(filepath.Dir(stray), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(stray, []byte("someone's notes\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			good := "f2ca1bb6c7e907d06dafe4687e579fce76b37e4e93b7605022da52e6ccc26fd2" // sha256 of "test\n"
			from := ledgertest.WriteSource(t, map[string]string{"w33/notes.txt": "not what the record says\n", "w34/video.mp4": "test\n"},
				// Changed since it was imported: another completion time.
				`{"old_id": "2026-W29", "nominal_time": "2026-07-13T02:00:00Z", "completed_at": "2026-07-15T10:12:00Z"}`,
				// The stray file's place, and a hash that is not the file's.
				`{"old_id": "2026-W33", "nominal_time": "2026-08-10T02:00:00Z", "completed_at": "2026-08-11T02:00:00Z",`+
					` "artifacts": [{"step": "assemble", "path": "w33/notes.txt", "sha256": "`+good+`"}]}`,
				// A reference the ledger holds already, and a file that is missing.
				`{"old_id": "2026-W34", "nominal_time": "2026-08-17T02:00:00Z", "completed_at": "2026-08-18T02:00:00Z",`+
					` "references": [{"step": "video", "remote_ref": "vt_31a0c1d2e3f40001"}], "costs": [{"remote_ref": "vt_31a0c1d2e3f40001", "amount": 1, "currency": "USD"}],`+
					` "artifacts": [{"step": "assemble", "path": "w34/gone.json", "sha256": "`+good+`"}]}`,
				// Not a record of this pipeline's plan.
				`{"old_id": "2026-W35", "nominal_time": "2026-08-24T02:00:00Z", "completed_at": "2026-08-25T02:00:00Z",`+
					` "references": [{"step": "thumbnail", "remote_ref": "vt_0000000000000035"}]}`,
				// Fine on its own.
				`{"old_id": "2026-W36", "nominal_time": "2026-08-31T02:00:00Z", "completed_at": "2026-09-01T02:00:00Z",`+
					` "artifacts": [{"step": "assemble", "path": "w34/video.mp4", "sha256": "`+good+`"}]}`)
			before, files := dumpLedger(t, led), hashTree(t, data)
			for _, dry := range []bool{true, false} {
				res, err := Import(ctx, led, set, ImportInput{Pipeline: "weekly-video", From: from, DataDir: data, DryRun: dry})
				want := []string{"artifact_exists 2026-W33", "artifact_missing 2026-W34", "hash_mismatch 2026-W33",
					"invalid_record 2026-W35", "old_id_changed 2026-W29", "reference_owned 2026-W34"}
				if got := conflictList(err); !slices.Equal(got, want) || res.OK || len(res.Conflicts) != len(want) {
					t.Errorf("dry run %v: conflicts\n  %s\nwant\n  %s", dry, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
				}
				if !strings.Contains(err.Error(), "nothing was written") || !strings.Contains(err.Error(), "thumbnail") {
					t.Errorf("the refusal does not say what and why: %v", err)
				}
			}
			if diff := dumpDiffLedger(before, dumpLedger(t, led)); diff != "" {
				t.Fatalf("a refused import wrote to the ledger: %s", diff)
			}
			if after := hashTree(t, data); !maps.Equal(files, after) {
				t.Fatalf("a refused import changed the data folder: %v -> %v", files, after)
			}
		})
	}
}

// TestImportRemovesItsFilesWhenTheCommitFails: an import whose plan moves
// (a run allocates in the period while it copies) removes what it copied
// and plans again; one that keeps moving gives up with nothing left.
func TestImportRemovesItsFilesWhenTheCommitFails(t *testing.T) {
	ctx := context.Background()
	set := importSet(t)
	p, _ := set.Get("weekly-video")
	allocateIn := func(led *ledger.Ledger, nominal time.Time, key string) {
		if _, err := led.Allocate(ctx, ledger.AllocateInput{Pipeline: "weekly-video", Key: key, Period: p.PeriodOf(nominal), NominalTime: nominal}); err != nil {
			t.Fatal(err)
		}
	}
	w30 := time.Date(2026, 7, 21, 2, 0, 0, 0, time.UTC)

	t.Run("planned again", func(t *testing.T) {
		led, data := ledgertest.Open(t, ledgertest.DriverURL(t, "sqlite")), t.TempDir()
		calls := 0
		beforeImportCommit = func() {
			if calls++; calls == 1 {
				if len(hashTree(t, filepath.Join(data, "artifacts", "weekly-video", "2026-W30-0"))) != 3 {
					t.Error("the files were not in place before the commit")
				}
				allocateIn(led, w30, "weekly-video/scheduled-x")
			}
		}
		t.Cleanup(func() { beforeImportCommit = nil })
		res, err := Import(ctx, led, set, ImportInput{Pipeline: "weekly-video", From: exampleLines, DataDir: data})
		if err != nil || calls != 2 {
			t.Fatalf("import: %+v, %v after %d attempts", res, err, calls)
		}
		got := slices.Sorted(maps.Keys(hashTree(t, filepath.Join(data, "artifacts", "weekly-video"))))
		want := []string{"2026-W29-0/cover-r0.png", "2026-W29-0/manifest.json", "2026-W29-0/video-r0.mp4",
			"2026-W30-1/cover-r0.png", "2026-W30-1/manifest.json", "2026-W30-1/video-r1.mp4", "2026-W31-0/cover-r0.png", "2026-W31-0/video-r0.mp4"}
		if !slices.Equal(got, want) {
			t.Fatalf("files after the second attempt\n  %v\nwant\n  %v", got, want)
		}
		if _, err := os.Stat(filepath.Join(data, "artifacts", "weekly-video", "2026-W30-0")); !os.IsNotExist(err) {
			t.Fatalf("the first attempt's folder is left: %v", err)
		}
		if check, err := report.Check(ctx, led, ""); err != nil || !check.OK {
			t.Fatalf("check: %+v, %v", check.Violations, err)
		}
	})

	t.Run("gives up", func(t *testing.T) {
		led, data := ledgertest.Open(t, ledgertest.DriverURL(t, "sqlite")), t.TempDir()
		n := 0
		beforeImportCommit = func() { n++; allocateIn(led, w30, "weekly-video/scheduled-"+string(rune('a'+n))) }
		t.Cleanup(func() { beforeImportCommit = nil })
		before := dumpLedger(t, led)
		_, err := Import(ctx, led, set, ImportInput{Pipeline: "weekly-video", From: exampleLines, DataDir: data})
		if !errors.Is(err, ledger.ErrImportMoved) || n != importAttempts {
			t.Fatalf("import while runs keep allocating: %v after %d attempts, want ErrImportMoved after %d", err, n, importAttempts)
		}
		if files := hashTree(t, data); len(files) != 0 {
			t.Fatalf("a failed import left %v", files)
		}
		if _, err := os.Stat(filepath.Join(data, "artifacts")); !os.IsNotExist(err) {
			t.Fatalf("a failed import left the folders it created: %v", err)
		}
		after := dumpLedger(t, led)
		if len(after["imports"]) != 0 || len(after["episodes"]) != len(before["episodes"])+importAttempts {
			t.Fatalf("a failed import wrote: %v", after["imports"])
		}
	})

	// A run for an old run's nominal time binds its key between the plan
	// and the commit: the refusal lists that conflict, as a dry run would
	// have.
	t.Run("conflict at commit", func(t *testing.T) {
		led, data := ledgertest.Open(t, ledgertest.DriverURL(t, "sqlite")), t.TempDir()
		w29 := time.Date(2026, 7, 13, 2, 0, 0, 0, time.UTC)
		beforeImportCommit = func() { allocateIn(led, w29, allot.AllocationKey("weekly-video", w29)) }
		t.Cleanup(func() { beforeImportCommit = nil })
		res, err := Import(ctx, led, set, ImportInput{Pipeline: "weekly-video", From: exampleLines, DataDir: data})
		var ce *ledger.ImportConflictError
		if !errors.As(err, &ce) || len(res.Conflicts) == 0 || res.Error == "" || !slices.Equal(res.Conflicts, ce.Conflicts) {
			t.Fatalf("import refused at commit: %+v, %v; want the conflicts in the result", res, err)
		}
		if files := hashTree(t, data); len(files) != 0 {
			t.Fatalf("a refused import left %v", files)
		}
	})
}

// TestImportIsTheSameRecordInBothForms: a record read from a folder and
// the same record as a line are one old run (skipped the second time); a
// changed value is a conflict.
func TestImportIsTheSameRecordInBothForms(t *testing.T) {
	ctx := context.Background()
	led, set := ledgertest.Open(t, ledgertest.DriverURL(t, "sqlite")), importSet(t)
	if _, err := Import(ctx, led, set, ImportInput{Pipeline: "weekly-video", From: "../../examples/import/weekly-video-state", DataDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	state, err := os.ReadFile("../../examples/import/weekly-video-state/2026-W32/state.json")
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := filepath.Abs("../../examples/import/weekly-video-state/2026-W32")
	line := strings.Join(strings.Fields(string(state)), " ")
	line = strings.ReplaceAll(line, `"path": "`, `"path": "`+dir+`/`)
	res, err := Import(ctx, led, set, ImportInput{Pipeline: "weekly-video", From: ledgertest.WriteSource(t, nil, line), DataDir: t.TempDir()})
	if err != nil || len(res.Skipped) != 1 || len(res.Imported) != 0 {
		t.Fatalf("the same record as a line: %+v, %v", res, err)
	}
	changed := strings.Replace(line, `"amount": 40`, `"amount": 41`, 1)
	_, err = Import(ctx, led, set, ImportInput{Pipeline: "weekly-video", From: ledgertest.WriteSource(t, nil, changed), DataDir: t.TempDir()})
	if got := conflictList(err); !slices.Equal(got, []string{"old_id_changed 2026-W32"}) {
		t.Fatalf("a changed cost: %v", got)
	}
}

// TestImportRefusesRecordsThatDoNotFitThePlan: each mistake in a record is
// named with the record and what to do.
func TestImportRefusesRecordsThatDoNotFitThePlan(t *testing.T) {
	led, set := ledgertest.Open(t, ledgertest.DriverURL(t, "sqlite")), importSet(t)
	const head = `"nominal_time": "2026-07-13T02:00:00Z", "completed_at": "2026-07-14T10:00:00Z"`
	sha := strings.Repeat("0", 64)
	for _, tc := range []struct{ record, want string }{
		{`{"old_id": "a b", ` + head + `}`, "old_id"},
		{`{"old_id": "x", "nominal_time": "1999-01-01T00:00:00Z", "completed_at": "2026-07-14T10:00:00Z"}`, "before 2000-01-01"},
		{`{"old_id": "x", "nominal_time": "2026-07-13T02:00:00Z"}`, "completed_at is missing"},
		{`{"old_id": "x", ` + head + `, "references": [{"step": "assemble", "remote_ref": "r1"}]}`, "only paid and effect steps"},
		{`{"old_id": "x", ` + head + `, "references": [{"step": "video", "remote_ref": "r1"}]}`, `has no cost: add {"remote_ref": "r1"`},
		{`{"old_id": "x", ` + head + `, "references": [{"step": "video", "remote_ref": "r1"}, {"step": "video", "remote_ref": "r2"}],` +
			` "costs": [{"remote_ref": "r1", "amount": 1, "currency": "USD"}, {"remote_ref": "r2", "amount": 1, "currency": "USD"}]}`, "revision 0 has two references"},
		{`{"old_id": "x", ` + head + `, "references": [{"step": "video", "remote_ref": "r1"}], "costs": [{"remote_ref": "r1", "amount": 1, "currency": "dollars"}]}`, "ISO 4217"},
		{`{"old_id": "x", ` + head + `, "costs": [{"remote_ref": "r9", "amount": 1, "currency": "USD"}]}`, "has no such reference"},
		{`{"old_id": "x", ` + head + `, "approvals": [{"decision": "maybe"}]}`, `use "approved" or "rejected"`},
		{`{"old_id": "x", ` + head + `, "approvals": [{"step": "video", "decision": "approved"}]}`, "not an approval step"},
		{`{"old_id": "x", ` + head + `, "artifacts": [{"step": "video", "path": "v.mp4", "sha256": "` + sha + `"}]}`, "has no reference"},
		{`{"old_id": "x", ` + head + `, "artifacts": [{"step": "assemble", "path": "m.json", "sha256": "abc"}]}`, "64 hex digits"},
		{`{"old_id": "x", ` + head + `, "artifacts": [{"step": "approve", "path": "m.json", "sha256": "` + sha + `"}]}`, "has no files"},
		{`{"old_id": "x", ` + head + `, "artifacts": [{"step": "assemble", "path": "a/m.json", "sha256": "` + sha + `"},` +
			` {"step": "publish", "path": "b/m.json", "sha256": "` + sha + `"}]}`, "would both be m.json"},
		{`{"old_id": "x", ` + head + `, "cost": 3}`, `unknown field "cost"`},
		{`{"old_id": "x", ` + head + `} {"old_id": "y"}`, "more than one JSON value"},
		// What the old system could not have done: finish or be approved
		// before its nominal time, charge an absurd amount.
		{`{"old_id": "x", "nominal_time": "2026-07-13T02:00:00Z", "completed_at": "2026-07-13T01:00:00Z"}`,
			"completed_at 2026-07-13T01:00:00Z is before nominal_time 2026-07-13T02:00:00Z"},
		{`{"old_id": "x", ` + head + `, "approvals": [{"decision": "approved", "at": "2026-07-12T09:00:00Z"}]}`,
			"approval of approve at 2026-07-12T09:00:00Z is before nominal_time 2026-07-13T02:00:00Z"},
		{`{"old_id": "x", ` + head + `, "references": [{"step": "video", "remote_ref": "r1"}], "costs": [{"remote_ref": "r1", "amount": 18446744073709551, "currency": "USD"}]}`,
			"above the bound of 10000000000.00 USD"},
	} {
		_, err := Import(context.Background(), led, set, ImportInput{Pipeline: "weekly-video", From: ledgertest.WriteSource(t, nil, tc.record), DryRun: true, DataDir: t.TempDir()})
		var ce *ledger.ImportConflictError
		if !errors.As(err, &ce) || len(ce.Conflicts) != 1 || ce.Conflicts[0].Kind != ledger.ConflictInvalidRecord || !strings.Contains(ce.Conflicts[0].Detail, tc.want) {
			t.Errorf("record %s: got %v, want one invalid_record mentioning %q", tc.record, err, tc.want)
		}
	}
}

// TestImportNotesWhatTheRecordLacks: a paid step without a reference and
// an approval without a decision are imported abandoned, with a note, and
// the episode checks clean.
func TestImportNotesWhatTheRecordLacks(t *testing.T) {
	ctx := context.Background()
	led, set := ledgertest.Open(t, ledgertest.DriverURL(t, "sqlite")), importSet(t)
	from := ledgertest.WriteSource(t, nil, `{"old_id": "w1", "nominal_time": "2026-07-13T02:00:00Z", "completed_at": "2026-07-14T10:00:00Z",`+
		` "references": [{"step": "video", "remote_ref": "vt_0000000000000001"}], "costs": [{"remote_ref": "vt_0000000000000001", "amount": 250, "currency": "EUR"}]}`)
	res, err := Import(ctx, led, set, ImportInput{Pipeline: "weekly-video", From: from, DataDir: t.TempDir()})
	if err != nil || len(res.Imported) != 1 || len(res.Imported[0].Notes) != 2 || res.Costs["EUR"] != 250 || res.References != 1 {
		t.Fatalf("import: %+v, %v", res, err)
	}
	cover, err := led.LatestPaidTask(ctx, "weekly-video", "2026-W29-0", "cover")
	if err != nil || cover.State != "abandoned" || cover.IdempotencyKey != "" || cover.RemoteRef != "" {
		t.Fatalf("cover: %+v, %v", cover, err)
	}
	if check, err := report.Check(ctx, led, ""); err != nil || !check.OK {
		t.Fatalf("check: %+v, %v", check.Violations, err)
	}
}

// dumpLedger reads every row the import writes, by table.
func dumpLedger(t *testing.T, led *ledger.Ledger) map[string][]string {
	t.Helper()
	ctx := context.Background()
	out := map[string][]string{}
	metas, err := led.Imports(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range metas {
		out["imports"] = append(out["imports"], m.OldID+" "+m.EpisodeID+" "+m.Digest)
	}
	eps, err := led.ListEpisodes(ctx, "weekly-video", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range eps {
		out["episodes"] = append(out["episodes"], ep.ID+" "+ep.AllocationKey+" "+string(ep.Status)+" "+ep.Outcome)
		tasks, _ := led.PaidTasks(ctx, ep.Pipeline, ep.ID)
		for _, pt := range tasks {
			out["paid_tasks"] = append(out["paid_tasks"], ep.ID+" "+pt.Step+" "+pt.RemoteRef+" "+pt.Artifact)
		}
		steps, _ := led.Steps(ctx, ep.Pipeline, ep.ID)
		for _, s := range steps {
			out["step_records"] = append(out["step_records"], ep.ID+" "+s.Step+" "+string(s.Status))
		}
		ds, _ := led.Decisions(ctx, ep.Pipeline, ep.ID)
		for _, d := range ds {
			out["operator_decisions"] = append(out["operator_decisions"], ep.ID+" "+d.RequestID)
		}
	}
	costs, _ := led.Costs(ctx, "", "")
	for _, c := range costs {
		out["cost_entries"] = append(out["cost_entries"], c.RemoteRef)
	}
	return out
}

func dumpDiffLedger(before, after map[string][]string) string {
	for _, table := range []string{"imports", "episodes", "paid_tasks", "step_records", "operator_decisions", "cost_entries"} {
		if !slices.Equal(before[table], after[table]) {
			return table + " changed: " + strings.Join(before[table], "; ") + " -> " + strings.Join(after[table], "; ")
		}
	}
	return ""
}

// TestLegacyKeysAreReservedForImports: the key an import gives an old run
// that was not a scheduled run is "legacy/<old id>" under the pipeline's
// prefix, which no operator's --key can take (allot.PlaceKey refuses
// it, as given or in full).
func TestLegacyKeysAreReservedForImports(t *testing.T) {
	for _, c := range []struct{ pipeline, oldID string }{{"weekly-video", "2026-W31"}, {"x", "legacy"}, {"daily-report", "2026-08-07.1"}} {
		if key := allot.LegacyKey(c.pipeline, c.oldID); key != allot.KeyPrefix(c.pipeline)+"legacy/"+c.oldID {
			t.Errorf("allot.LegacyKey(%s, %s) = %q: not legacy/<old id> under the pipeline's prefix", c.pipeline, c.oldID, key)
		}
		for _, given := range []string{"legacy/" + c.oldID, allot.LegacyKey(c.pipeline, c.oldID)} {
			if key, err := allot.PlaceKey(c.pipeline, given, nil); !errors.Is(err, allot.ErrReservedKey) {
				t.Errorf("PlaceKey(%s, %s) = %q, %v; want ErrReservedKey", c.pipeline, given, key, err)
			}
		}
	}
}

// TestImportOwnsTheNominalTimesItImports: each old run of the example is
// bound to the key every run for its nominal time forms (so the backfill
// dry run counts those times as existing), unless its record says it was
// not a scheduled run; the import's result says which.
func TestImportOwnsTheNominalTimesItImports(t *testing.T) {
	ctx := context.Background()
	led, set := ledgertest.Open(t, ledgertest.DriverURL(t, "sqlite")), importSet(t)
	res, err := Import(ctx, led, set, ImportInput{Pipeline: "weekly-video", From: exampleLines, InPlace: true})
	if err != nil || len(res.Imported) != 3 {
		t.Fatalf("import: %+v, %v", res, err)
	}
	var keys []string
	for _, e := range res.Imported {
		keys = append(keys, allot.AllocationKey("weekly-video", e.NominalTime))
		if e.AllocationKey != keys[len(keys)-1] || !e.Scheduled {
			t.Errorf("old ID %s: key %q, scheduled %v; want its time's key %q", e.OldID, e.AllocationKey, e.Scheduled, keys[len(keys)-1])
		}
	}
	// An extra run of 2026-W31 at the same time, marked as not scheduled.
	w31 := res.Imported[2].NominalTime
	extra := ledgertest.WriteSource(t, nil, `{"old_id": "2026-W31-extra", "nominal_time": "`+w31.Format(time.RFC3339)+`", "completed_at": "2026-07-29T10:00:00Z", "scheduled": false}`)
	more, err := Import(ctx, led, set, ImportInput{Pipeline: "weekly-video", From: extra, InPlace: true})
	if err != nil || len(more.Imported) != 1 {
		t.Fatalf("import of the extra run: %+v, %v", more, err)
	}
	if e := more.Imported[0]; e.AllocationKey != allot.LegacyKey("weekly-video", "2026-W31-extra") || e.Scheduled || e.EpisodeID != "2026-W31-1" ||
		len(e.Notes) == 0 || !strings.Contains(e.Notes[len(e.Notes)-1], "not a scheduled run") {
		t.Fatalf("the extra run: %+v", e)
	}
	// Without "scheduled": false it would claim a time another old run has.
	claim := ledgertest.WriteSource(t, nil, `{"old_id": "2026-W31-again", "nominal_time": "`+w31.Format(time.RFC3339)+`", "completed_at": "2026-07-29T10:00:00Z"}`)
	if _, err := Import(ctx, led, set, ImportInput{Pipeline: "weekly-video", From: claim, InPlace: true, DryRun: true}); !slices.Equal(conflictList(err), []string{"key_bound 2026-W31-again"}) {
		t.Fatalf("a second claim on 2026-W31's time: %v", err)
	}

	// The backfill dry run's count: the imported times exist, the extra
	// run binds none, a new time does not.
	counts, err := led.EpisodesPerKey(ctx, "weekly-video", append(keys, allot.AllocationKey("weekly-video", w31.Add(7*24*time.Hour))))
	if n := len(counts); err != nil || n != 3 {
		t.Fatalf("existing episodes among the imported times and one new time: %d, %v; want 3", n, err)
	}
	if check, err := report.Check(ctx, led, ""); err != nil || !check.OK {
		t.Fatalf("check: %+v, %v", check.Violations, err)
	}
}
