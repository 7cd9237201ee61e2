package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"allot/artifacts"
	"allot/internal/importer"
	"allot/internal/ledger"
	"allot/internal/pipelinetest"
	"allot/workflows"
)

// The worked example of the "Import" section of docs/import-and-check.md.
const (
	exampleJSONL = "../examples/import/weekly-video.jsonl"
	exampleDir   = "../examples/import/weekly-video-state"
)

// importPipelines is the weekly-video pipeline with its cover made by a
// named vendor: both the default vendor and the named one point at the
// test's vendor.
const importPipelines = `
[[vendor]]
name        = "studio"
url         = "%s"
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

// failingVendor answers every request with 503 and counts them.
func failingVendor(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		http.Error(w, `{"error":{"code":"down","message":"this vendor fails every request"}}`, http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func writePipelines(t *testing.T, vendorURL string) string {
	t.Helper()
	path := pipelinetest.Write(t, t.TempDir(), fmt.Sprintf(importPipelines, vendorURL))
	return path
}

// sourceFigures reads the example's records as they are: their artifacts'
// sha256, their cost total (USD) and their number of references.
func sourceFigures(t *testing.T) (hashes []string, costs int64, refs int) {
	t.Helper()
	var recs []importer.LegacyRecord
	f, err := os.Open(exampleJSONL)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r importer.LegacyRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	data, err := os.ReadFile(filepath.Join(exampleDir, "2026-W32", "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r importer.LegacyRecord
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	recs = append(recs, r)
	for _, r := range recs {
		for _, a := range r.Artifacts {
			hashes = append(hashes, a.SHA256)
		}
		for _, c := range r.Costs {
			if c.Currency != "USD" {
				t.Fatalf("the example's costs are in USD, not %s", c.Currency)
			}
			costs += c.Amount
		}
		refs += len(r.References)
	}
	slices.Sort(hashes)
	return hashes, costs, refs
}

// ledgerFigures reads the same figures from the ledger, hashing the files
// it names.
func ledgerFigures(t *testing.T, url string) (hashes []string, costs int64, refs int) {
	t.Helper()
	ctx := context.Background()
	led, err := ledger.OpenReadOnly(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	eps, err := led.ListEpisodes(ctx, "weekly-video", "")
	if err != nil {
		t.Fatal(err)
	}
	hashFile := func(path, recorded string) {
		sum, err := artifacts.SHA256File(path)
		if err != nil || sum != recorded {
			t.Errorf("artifact %s: sha256 %s, %v; the ledger recorded %s", path, sum, err, recorded)
		}
		hashes = append(hashes, sum)
	}
	for _, ep := range eps {
		tasks, err := led.PaidTasks(ctx, ep.Pipeline, ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, pt := range tasks {
			if pt.RemoteRef != "" {
				refs++
			}
			if pt.Artifact != "" {
				hashFile(pt.Artifact, pt.SHA256)
			}
		}
		steps, err := led.Steps(ctx, ep.Pipeline, ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range steps {
			for _, o := range s.Outputs {
				hashFile(o.Path, o.SHA256)
			}
		}
	}
	cs, err := led.Costs(ctx, "weekly-video", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		costs += c.Amount
	}
	slices.Sort(hashes)
	return hashes, costs, refs
}

// filesUnder hashes every file under dir, by path.
func filesUnder(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if os.IsNotExist(err) && path == dir {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() {
			return err
		}
		sum, err := artifacts.SHA256File(path)
		out[path] = sum
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestImportPaysNothingAndCheckPasses imports the docs' example (JSON
// Lines and the directory form) with vendors that fail every request: none
// is asked anything, check passes afterwards, and the artifact hashes, the
// cost total and the number of references are the source's.
func TestImportPaysNothingAndCheckPasses(t *testing.T) {
	vendor, requests := failingVendor(t)
	t.Setenv("ALLOT_VENDOR_URL", vendor.URL)
	t.Setenv("ALLOT_VENDOR_API_KEY", "default-key")
	t.Setenv("STUDIO_API_KEY", "studio-key")
	pipes := writePipelines(t, vendor.URL)
	srcHashes, srcCosts, srcRefs := sourceFigures(t)

	for _, l := range testLedgers(t) {
		t.Run(l.driver, func(t *testing.T) {
			data := t.TempDir()
			flags := []string{"--ledger", l.url, "--pipelines", pipes, "--data-dir", data}
			led, err := ledger.Open(context.Background(), l.url) // created as a worker would
			if err != nil {
				t.Fatal(err)
			}
			led.Close()
			empty := l.dump(t)

			// A dry run says what would be imported and writes nothing.
			code, stdout, stderr := run(t, append([]string{"import", "--pipeline", "weekly-video", "--from", exampleJSONL, "--dry-run", "--json"}, flags...)...)
			var dry importer.ImportResult
			if code != exitOK || json.Unmarshal([]byte(stdout), &dry) != nil || !dry.OK || !dry.DryRun || len(dry.Imported) != 3 || dry.References != 7 {
				t.Fatalf("dry run: exit %d, %s %s", code, stdout, stderr)
			}
			if files := filesUnder(t, filepath.Join(data, "artifacts")); len(files) != 0 {
				t.Fatalf("a dry run wrote %v", files)
			}
			if diff := dumpDiff(empty, l.dump(t)); diff != "" {
				t.Fatalf("a dry run wrote to the ledger: %s", diff)
			}

			var got importer.ImportResult
			for _, from := range []string{exampleJSONL, exampleDir} {
				code, stdout, stderr = run(t, append([]string{"import", "--pipeline", "weekly-video", "--from", from, "--json"}, flags...)...)
				if code != exitOK || json.Unmarshal([]byte(stdout), &got) != nil || !got.OK {
					t.Fatalf("import %s: exit %d, %s %s", from, code, stdout, stderr)
				}
			}
			if len(got.Imported) != 1 || got.Imported[0].EpisodeID != "2026-W32-0" || got.Imported[0].Outcome != "rejected" {
				t.Fatalf("the directory form imported %+v, want 2026-W32 as the rejected episode 2026-W32-0", got.Imported)
			}
			if dry.Imported[1].EpisodeID != "2026-W30-0" || dry.Imported[1].AllocationKey != "weekly-video/scheduled-2026-07-20T02:00:00Z" || !dry.Imported[1].Scheduled {
				t.Fatalf("dry run planned %+v", dry.Imported[1])
			}

			code, stdout, stderr = run(t, "check", "--ledger", l.url, "--pipelines", pipes)
			if code != exitOK || !strings.Contains(stdout, "invariants hold (10 artifact files verified)") {
				t.Fatalf("check after the import: exit %d, %s %s", code, stdout, stderr)
			}

			// Again: everything is skipped, nothing changes.
			before, files := l.dump(t), filesUnder(t, data)
			code, stdout, _ = run(t, append([]string{"import", "--pipeline", "weekly-video", "--from", exampleJSONL, "--json"}, flags...)...)
			if code != exitOK || json.Unmarshal([]byte(stdout), &got) != nil || len(got.Imported) != 0 || len(got.Skipped) != 3 {
				t.Fatalf("the same import again: exit %d, %s", code, stdout)
			}
			if diff := dumpDiff(before, l.dump(t)); diff != "" {
				t.Fatalf("importing again changed the ledger: %s", diff)
			}
			if after := filesUnder(t, data); !maps.Equal(files, after) {
				t.Fatalf("importing again changed the files")
			}

			hashes, costs, refs := ledgerFigures(t, l.url)
			if !slices.Equal(hashes, srcHashes) || costs != srcCosts || refs != srcRefs {
				t.Fatalf("ledger: %d artifact hashes %v, costs %d, %d references; source: %d hashes %v, costs %d, %d references",
					len(hashes), hashes, costs, refs, len(srcHashes), srcHashes, srcCosts, srcRefs)
			}
			t.Logf("figures (%s): %d artifact hashes equal the source's; cost total %d USD minor units (source %d); %d references (source %d)",
				l.driver, len(hashes), costs, srcCosts, refs, srcRefs)
		})
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("the vendor got %d requests during import and check, want 0", n)
	}
}

func dumpDiff(before, after map[string][]string) string {
	for table, rows := range before {
		if !slices.Equal(rows, after[table]) {
			return fmt.Sprintf("table %s changed from\n  %s\nto\n  %s", table, strings.Join(rows, "\n  "), strings.Join(after[table], "\n  "))
		}
	}
	for table := range after {
		if _, ok := before[table]; !ok {
			return "table " + table + " appeared"
		}
	}
	return ""
}

// TestImportRefusalListsEveryConflict: with --json the refusal is one JSON
// document listing each conflict, the exit code is 1, nothing is written.
func TestImportRefusalListsEveryConflict(t *testing.T) {
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "video.mp4"), []byte("not the old video\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lines := []string{
		`{"old_id": "a", "nominal_time": "2026-07-13T02:00:00Z", "completed_at": "2026-07-14T10:00:00Z",` +
			` "references": [{"step": "video", "remote_ref": "vt_0000000a"}], "costs": [{"remote_ref": "vt_0000000a", "amount": 250, "currency": "USD"}],` +
			` "artifacts": [{"step": "video", "path": "video.mp4", "sha256": "` + strings.Repeat("ab", 32) + `"}]}`,
		`{"old_id": "b", "nominal_time": "2026-07-20T02:00:00Z", "completed_at": "2026-07-21T10:00:00Z", "refs": []}`,
		`{"old_id": "c", "nominal_time": "2026-07-20T02:00:00Z", "completed_at": "2026-07-21T10:00:00Z",` +
			` "references": [{"step": "video", "remote_ref": "vt_0000000a"}], "costs": [{"remote_ref": "vt_0000000a", "amount": 250, "currency": "USD"}]}`,
	}
	from := filepath.Join(src, "old.jsonl")
	if err := os.WriteFile(from, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := testLedgers(t)[0]
	led, err := ledger.Open(context.Background(), l.url)
	if err != nil {
		t.Fatal(err)
	}
	led.Close()
	before := l.dump(t)
	data := t.TempDir()
	code, stdout, _ := run(t, "import", "--pipeline", "weekly-video", "--from", from, "--ledger", l.url, "--data-dir", data, "--json")
	var res importer.ImportResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("--json printed %q: %v", stdout, err)
	}
	var kinds []string
	for _, c := range res.Conflicts {
		kinds = append(kinds, c.Kind+" "+c.OldID)
	}
	slices.Sort(kinds)
	want := []string{"duplicate c", "hash_mismatch a", "invalid_record b"}
	if code != exitError || res.OK || !slices.Equal(kinds, want) || !strings.Contains(res.Error, "nothing was written") {
		t.Fatalf("exit %d, conflicts %v (want %v): %s", code, kinds, want, stdout)
	}
	if strings.Count(stdout, `"conflicts"`) != 1 {
		t.Fatalf("the refusal printed more than one document: %s", stdout)
	}
	if diff := dumpDiff(before, l.dump(t)); diff != "" {
		t.Fatalf("a refused import wrote: %s", diff)
	}
	if files := filesUnder(t, data); len(files) != 0 {
		t.Fatalf("a refused import wrote %v", files)
	}
}

// TestDocsShowTheExampleRecord: the record the docs' Import section
// shows is the example file's first, exactly.
func TestDocsShowTheExampleRecord(t *testing.T) {
	readme, err := os.ReadFile("../docs/import-and-check.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "Its first record, spread over lines here:\n\n```json\n")
	shown, _, ok2 := strings.Cut(rest, "```")
	lines, err := os.ReadFile(exampleJSONL)
	if !ok || !ok2 || err != nil {
		t.Fatalf("docs/import-and-check.md has no example record (%v)", err)
	}
	first, _, _ := strings.Cut(string(lines), "\n")
	var a, b importer.LegacyRecord
	if err := json.Unmarshal([]byte(shown), &a); err != nil {
		t.Fatalf("the docs' record is not a record: %v", err)
	}
	if err := json.Unmarshal([]byte(first), &b); err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatalf("docs/import-and-check.md shows\n%s\nbut the example's first record is\n%s", ja, jb)
	}
}

// TestImportOverTheCapNeedsConsent: old runs beyond the pipeline's
// max_episodes_per_period are refused, naming the period and the old IDs,
// with the command that imports them anyway; that command, run as printed,
// imports them and records the choice in each such episode's metadata.
func TestImportOverTheCapNeedsConsent(t *testing.T) {
	vendor, _ := failingVendor(t)
	capped := strings.Replace(fmt.Sprintf(importPipelines, vendor.URL), "name = \"weekly-video\"\n", "name = \"weekly-video\"\nmax_episodes_per_period = 1\n", 1)
	pipes := pipelinetest.Write(t, t.TempDir(), capped)
	from := filepath.Join(t.TempDir(), "old.jsonl")
	if err := os.WriteFile(from, []byte(
		`{"old_id": "w29-mon", "nominal_time": "2026-07-13T02:00:00Z", "completed_at": "2026-07-14T10:00:00Z"}`+"\n"+
			`{"old_id": "w29-thu", "nominal_time": "2026-07-16T02:00:00Z", "completed_at": "2026-07-16T10:00:00Z"}`+"\n"+
			`{"old_id": "w30-mon", "nominal_time": "2026-07-20T02:00:00Z", "completed_at": "2026-07-21T10:00:00Z"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := testLedgers(t)[0]
	t.Setenv("ALLOT_LEDGER", l.url)
	t.Setenv("ALLOT_PIPELINES", pipes)
	led, err := ledger.Open(context.Background(), l.url)
	if err != nil {
		t.Fatal(err)
	}
	led.Close()
	before := l.dump(t)

	code, stdout, _ := run(t, "import", "--pipeline", "weekly-video", "--from", from, "--in-place", "--json")
	var res importer.ImportResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != exitError || res.OK || len(res.Conflicts) != 1 ||
		res.Conflicts[0].Kind != ledger.ConflictOverCap || !strings.Contains(res.Conflicts[0].Detail, "2026-W29") || !strings.Contains(res.Conflicts[0].Detail, "w29-thu") {
		t.Fatalf("import over the cap: exit %d, %v, %s", code, err, stdout)
	}
	if diff := dumpDiff(before, l.dump(t)); diff != "" {
		t.Fatalf("a refused import wrote: %s", diff)
	}
	code, _, stderr := run(t, "import", "--pipeline", "weekly-video", "--from", from, "--in-place")
	if code != exitError || !strings.Contains(stderr, res.Next) || !strings.HasSuffix(res.Next, " --over-cap") {
		t.Fatalf("the refusal does not print the command with --over-cap (%q): exit %d, %s", res.Next, code, stderr)
	}

	words, err := workflows.SplitCommand(res.Next)
	if err != nil || words[0] != "starter" {
		t.Fatalf("the printed command %q: %v", res.Next, err)
	}
	code, stdout, stderr = run(t, append(words[1:], "--json")...)
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != exitOK || !res.OK || !res.OverCap || len(res.Imported) != 3 {
		t.Fatalf("%s: exit %d, %s %s", res.Next, code, stdout, stderr)
	}
	for _, e := range res.Imported {
		if e.OverCap != (e.OldID == "w29-thu") {
			t.Errorf("imported %s: over cap %v", e.OldID, e.OverCap)
		}
	}
	led, err = ledger.OpenReadOnly(context.Background(), l.url)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	metas, err := led.Imports(context.Background(), "weekly-video")
	if err != nil || len(metas) != 3 {
		t.Fatalf("metadata %+v, %v", metas, err)
	}
	for _, m := range metas {
		if m.OverCap != (m.OldID == "w29-thu") {
			t.Errorf("metadata of %s: over cap %v", m.OldID, m.OverCap)
		}
	}
}

// TestImportOverBudgetNeedsConsent: old runs whose costs would take a
// budget's week over its limit are refused, dry or not, naming the period,
// with the command that imports them anyway; that command, run as printed,
// imports them and records who allowed it and why.
func TestImportOverBudgetNeedsConsent(t *testing.T) {
	vendor, _ := failingVendor(t)
	budgeted := fmt.Sprintf(importPipelines, vendor.URL) + `
[[budget]]
name     = "video-weekly"
pipeline = "weekly-video"
period   = "iso-week"
limit    = { amount = 400, currency = "USD" }
`
	budgeted = strings.Replace(budgeted, "  name = \"video\"\n  kind = \"paid\"\n", "  name = \"video\"\n  kind = \"paid\"\n  max_cost = { amount = 250, currency = \"USD\" }\n", 1)
	budgeted = strings.Replace(budgeted, "  vendor = \"studio\"\n", "  vendor = \"studio\"\n  max_cost = { amount = 40, currency = \"USD\" }\n", 1)
	pipes := pipelinetest.Write(t, t.TempDir(), budgeted)
	from := filepath.Join(t.TempDir(), "old.jsonl")
	var lines []string
	for _, id := range []string{"mon", "thu"} {
		day := map[string]string{"mon": "13", "thu": "16"}[id]
		lines = append(lines, fmt.Sprintf(`{"old_id": "w29-%s", "nominal_time": "2026-07-%sT02:00:00Z", "completed_at": "2026-07-%sT10:00:00Z", "scheduled": %v,`+
			` "references": [{"step": "video", "remote_ref": "vt_w29%s"}], "costs": [{"remote_ref": "vt_w29%s", "amount": 250, "currency": "USD"}]}`,
			id, day, day, id == "mon", id, id))
	}
	if err := os.WriteFile(from, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := testLedgers(t)[0]
	t.Setenv("ALLOT_LEDGER", l.url)
	t.Setenv("ALLOT_PIPELINES", pipes)
	t.Setenv("USER", "maria")
	led, err := ledger.Open(context.Background(), l.url)
	if err != nil {
		t.Fatal(err)
	}
	led.Close()
	before := l.dump(t)

	for _, dry := range []string{"--dry-run", "--in-place"} {
		code, stdout, _ := run(t, "import", "--pipeline", "weekly-video", "--from", from, "--in-place", dry, "--json")
		var res importer.ImportResult
		if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != exitError || res.OK || len(res.Conflicts) != 1 ||
			res.Conflicts[0].Kind != ledger.ConflictOverBudget || !strings.Contains(res.Conflicts[0].Detail, "budget video-weekly period 2026-W29") {
			t.Fatalf("import %s over the budget: exit %d, %v, %s", dry, code, err, stdout)
		}
	}
	if diff := dumpDiff(before, l.dump(t)); diff != "" {
		t.Fatalf("a refused import wrote: %s", diff)
	}
	code, _, stderr := run(t, "import", "--pipeline", "weekly-video", "--from", from, "--in-place")
	next := importer.ImportResult{}
	_, stdout, _ := run(t, "import", "--pipeline", "weekly-video", "--from", from, "--in-place", "--json")
	if err := json.Unmarshal([]byte(stdout), &next); err != nil || code != exitError || next.Next == "" || !strings.Contains(stderr, next.Next) ||
		!strings.Contains(next.Next, "--over-budget 'the old system paid these costs' --by 'maria'") {
		t.Fatalf("the refusal does not print the command with --over-budget (%q): exit %d, %s", next.Next, code, stderr)
	}
	words, err := workflows.SplitCommand(next.Next)
	if err != nil || words[0] != "starter" {
		t.Fatalf("the printed command %q: %v", next.Next, err)
	}
	var res importer.ImportResult
	code, stdout, stderr = run(t, append(words[1:], "--json")...)
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != exitOK || !res.OK || len(res.Imported) != 2 || len(res.OverBudget) != 1 {
		t.Fatalf("%s: exit %d, %s %s", next.Next, code, stdout, stderr)
	}
	led, err = ledger.OpenReadOnly(context.Background(), l.url)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	metas, err := led.Imports(context.Background(), "weekly-video")
	if err != nil || len(metas) != 2 {
		t.Fatalf("metadata %+v, %v", metas, err)
	}
	for _, m := range metas {
		if m.OverBudgetBy != "maria" || m.OverBudgetReason != "the old system paid these costs" {
			t.Errorf("metadata of %s: over budget by %q: %q", m.OldID, m.OverBudgetBy, m.OverBudgetReason)
		}
	}
}
