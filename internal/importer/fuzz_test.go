package importer

// Fuzz targets for the import format (docs/import-and-check.md, "Import"): a JSON Lines file
// or a state.json is read by decodeLegacy and checked against a pipeline's
// plan by planRecord. Seeds are in testdata/fuzz/<target>; `go test` runs
// them, .ci/fuzz explores further.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

// fuzzImportPipelines: the embedded weekly-video (two paid steps, one
// approval) and daily-report (local steps in Berlin), and a pipeline with
// every kind a record can name (exec, paid, effect, two approvals) whose
// periods are the day before in a zone with DST changes at midnight.
const fuzzImportPipelines = `
[[vendor]]
name    = "outbox"
adapter = "go"

[[pipeline]]
name          = "settle"
period        = "day"
time_zone     = "America/Santiago"
period_offset = "-1d"
  [[pipeline.step]]
  name    = "settle"
  kind    = "exec"
  command = ["./bin/settle"]
  outputs = ["total.csv"]
  [[pipeline.step]]
  name = "charge"
  kind = "paid"
  [[pipeline.step]]
  name = "review"
  kind = "approval"
  [[pipeline.step]]
  name = "signoff"
  kind = "approval"
  [[pipeline.step]]
  name   = "notify"
  kind   = "effect"
  vendor = "outbox"
`

func fuzzPipelines(f *testing.F) []*pipeline.Pipeline {
	f.Helper()
	def, err := pipeline.Load("")
	if err != nil {
		f.Fatal(err)
	}
	extra, err := pipeline.Parse([]byte(fuzzImportPipelines), "fuzz")
	if err != nil {
		f.Fatal(err)
	}
	var out []*pipeline.Pipeline
	for _, s := range []struct {
		set  *pipeline.Set
		name string
	}{{def, "weekly-video"}, {def, "daily-report"}, {extra, "settle"}} {
		p, err := s.set.Get(s.name)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// fuzzImportNow is the import's clock: the examples' runs are in its past.
var fuzzImportNow = time.Date(2026, 8, 10, 12, 0, 0, 0, time.UTC)

var (
	fuzzSHA256   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	fuzzCurrency = regexp.MustCompile(`^[A-Z]{3}$`)
)

// FuzzImportRecord: one record (a line of JSON Lines, or a state.json)
// never panics the reader or the planner. A record the planner accepts
// satisfies the docs' constraints: its key, period, outcome and times;
// references as succeeded tasks with valid references, revisions and
// costs; decisions of approval steps; files with sha256; a digest that is
// the same however its lists are ordered and its times written. A refused
// record leaves nothing planned and every conflict says where and why.
func FuzzImportRecord(f *testing.F) {
	pipelines := fuzzPipelines(f)
	f.Fuzz(func(t *testing.T, pick uint8, data []byte) {
		p := pipelines[int(pick)%len(pipelines)]
		rec, err := decodeLegacy(data)
		if err != nil {
			if msg := err.Error(); !strings.Contains(msg, "not a record") && !strings.Contains(msg, "more than one JSON value") {
				t.Fatalf("decode error does not say what is wrong: %q", msg)
			}
			return
		}
		src := sourceRecord{rec: rec, origin: "fuzz.jsonl line 1", source: "/import/fuzz.jsonl", base: "/import"}
		pr, conflicts := planRecord(p, src, fuzzImportNow)
		pr2, conflicts2 := planRecord(p, src, fuzzImportNow)
		if !reflect.DeepEqual(pr, pr2) || !reflect.DeepEqual(conflicts, conflicts2) {
			t.Fatalf("planRecord is not deterministic:\n%+v %v\n%+v %v", pr, conflicts, pr2, conflicts2)
		}
		if !reflect.DeepEqual(rec, src.rec) {
			t.Fatalf("planRecord changed the record it was given")
		}
		if len(conflicts) > 0 {
			if !reflect.DeepEqual(pr, plannedRecord{}) {
				t.Fatalf("a refused record was planned anyway: %+v", pr)
			}
			for _, c := range conflicts {
				if c.Kind != ledger.ConflictInvalidRecord || c.OldID != rec.OldID || !strings.HasPrefix(c.Detail, src.origin+": ") || len(c.Detail) < len(src.origin)+12 {
					t.Fatalf("conflict does not say where and why: %+v", c)
				}
			}
			return
		}
		checkPlanned(t, p, src, pr)

		// The digest is the record's data, not its form: lists in another
		// order and times in another zone give the same digest.
		other := rec
		other.References = slices.Clone(rec.References)
		other.Costs = slices.Clone(rec.Costs)
		other.Artifacts = slices.Clone(rec.Artifacts)
		slices.Reverse(other.References)
		slices.Reverse(other.Costs)
		slices.Reverse(other.Artifacts)
		zone := time.FixedZone("fuzz", -(9*3600 + 30*60))
		other.NominalTime, other.CompletedAt = rec.NominalTime.In(zone), rec.CompletedAt.In(zone)
		other.Approvals = nil
		for _, a := range rec.Approvals {
			a.At = a.At.In(zone)
			other.Approvals = append(other.Approvals, a)
		}
		pro, cs := planRecord(p, sourceRecord{rec: other, origin: src.origin, source: src.source, base: src.base}, fuzzImportNow)
		if len(cs) > 0 || pro.rec.Digest != pr.rec.Digest {
			t.Fatalf("the same record in another order or zone: digest %s, %v; want %s", pro.rec.Digest, cs, pr.rec.Digest)
		}
	})
}

// checkPlanned asserts the docs' constraints on an accepted record.
func checkPlanned(t *testing.T, p *pipeline.Pipeline, src sourceRecord, pr plannedRecord) {
	t.Helper()
	rec, ir := src.rec, pr.rec
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("accepted record %q for %s: %s", rec.OldID, p.Name, fmt.Sprintf(format, args...))
	}
	if ir.OldID != rec.OldID || !oldIDPattern.MatchString(ir.OldID) || ir.Source != src.source {
		fail("old ID %q, source %q", ir.OldID, ir.Source)
	}
	// A scheduled run (the default) holds its time's key, any other its
	// legacy key.
	want := allot.AllocationKey(p.Name, rec.NominalTime)
	if rec.Scheduled != nil && !*rec.Scheduled {
		want = p.Name + "/legacy/" + rec.OldID
	}
	if ir.Key != want || ir.Scheduled != (want != p.Name+"/legacy/"+rec.OldID) {
		fail("key %q (scheduled %v), want %q", ir.Key, ir.Scheduled, want)
	}
	if err := allot.ValidateAllocationKey(ir.Key); err != nil {
		fail("key %q is not a valid allocation key: %v", ir.Key, err)
	}
	if ir.NominalTime.Location() != time.UTC || !ir.NominalTime.Equal(rec.NominalTime) || p.CheckNominalTime(ir.NominalTime, fuzzImportNow) != nil {
		fail("nominal time %s", ir.NominalTime)
	}
	if ir.Period != p.PeriodOf(rec.NominalTime) {
		fail("period %s, want %s", ir.Period, p.PeriodOf(rec.NominalTime))
	}
	if ir.Reason != importReason || (ir.Outcome != allot.OutcomeCompleted && ir.Outcome != allot.OutcomeRejected) {
		fail("outcome %s (%s)", ir.Outcome, ir.Reason)
	}
	if !encodable(ir.CompletedAt) || ir.CompletedAt.Location() != time.UTC || ir.CompletedAt.Before(ir.NominalTime) {
		fail("completed at %s (nominal time %s)", ir.CompletedAt, ir.NominalTime)
	}
	if !fuzzSHA256.MatchString(ir.Digest) {
		fail("digest %q", ir.Digest)
	}

	// Tasks: one per reference, succeeded; abandoned for a remote step
	// without one.
	refs, revs := map[string]bool{}, map[string]bool{}
	for _, tk := range ir.Tasks {
		s, ok := p.Step(tk.Step)
		if !ok || !s.Kind.Remote() {
			fail("task of step %q, which is not a paid or effect step", tk.Step)
		}
		switch tk.State {
		case allot.PaidSucceeded:
			if tk.RemoteRef == "" || strings.ContainsAny(tk.RemoteRef, " \t\r\n") || refs[tk.RemoteRef] {
				fail("reference %q is empty, has spaces or is repeated", tk.RemoteRef)
			}
			refs[tk.RemoteRef] = true
			if tk.Revision < 0 || revs[fmt.Sprint(tk.Step, "/", tk.Revision)] {
				fail("step %s revision %d is negative or repeated", tk.Step, tk.Revision)
			}
			revs[fmt.Sprint(tk.Step, "/", tk.Revision)] = true
			if strings.ContainsAny(tk.IdempotencyKey, " \t\r\n") {
				fail("idempotency key %q has spaces", tk.IdempotencyKey)
			}
			if s.Kind == allot.KindPaid && (!fuzzCurrency.MatchString(tk.Currency) || tk.Amount < 0 || tk.Amount > allot.MaxAmount) {
				fail("paid reference %q costs %d %q", tk.RemoteRef, tk.Amount, tk.Currency)
			}
			if s.Kind == allot.KindEffect && (tk.Amount != 0 || tk.Currency != "") {
				fail("effect reference %q costs %d %q", tk.RemoteRef, tk.Amount, tk.Currency)
			}
		case allot.PaidAbandoned:
			if tk.RemoteRef != "" || tk.Error == "" || tk.Currency != "" {
				fail("abandoned task %+v", tk)
			}
		default:
			fail("task state %q", tk.State)
		}
		if tk.SHA256 != "" && !fuzzSHA256.MatchString(tk.SHA256) {
			fail("task sha256 %q", tk.SHA256)
		}
	}
	for _, r := range rec.References {
		if !refs[r.RemoteRef] {
			fail("reference %q was not imported", r.RemoteRef)
		}
	}

	// Steps and decisions follow the plan; a rejected run stops at its
	// rejecting approval.
	approvalSteps := map[string]bool{}
	for _, s := range p.Steps {
		if s.Kind == allot.KindApproval {
			approvalSteps[s.Name] = true
		}
	}
	recorded := map[string]bool{}
	for _, sr := range ir.Steps {
		s, ok := p.Step(sr.Step)
		if !ok || s.Kind == allot.KindPaid || recorded[sr.Step] {
			fail("step record of %q", sr.Step)
		}
		recorded[sr.Step] = true
		switch sr.Status {
		case allot.StepCompleted, allot.StepAbandoned, allot.StepApproved, allot.StepRejected:
		default:
			fail("step %s has status %q", sr.Step, sr.Status)
		}
		if (sr.Status == allot.StepApproved || sr.Status == allot.StepRejected) != (s.Kind == allot.KindApproval && sr.Status != allot.StepAbandoned) {
			fail("step %s (%s) has status %s", sr.Step, s.Kind, sr.Status)
		}
		if !encodable(sr.CompletedAt) {
			fail("step %s completed at %s", sr.Step, sr.CompletedAt)
		}
	}
	requests := map[string]bool{}
	counts := map[string]int{}
	rejected := false
	for _, d := range ir.Decisions {
		if !approvalSteps[d.Step] || (d.Action != allot.ActionApprove && d.Action != allot.ActionReject) {
			fail("decision %+v", d)
		}
		if want := fmt.Sprintf("import:%s:%s:%d", rec.OldID, d.Step, counts[d.Step]); d.RequestID != want || requests[d.RequestID] {
			fail("decision request %q, want %q (unique)", d.RequestID, want)
		}
		counts[d.Step]++
		requests[d.RequestID] = true
		if !encodable(d.At) || d.At.Location() != time.UTC || d.At.Before(ir.NominalTime) {
			fail("decision at %s (nominal time %s)", d.At, ir.NominalTime)
		}
	}
	for _, sr := range ir.Steps {
		rejected = rejected || sr.Status == allot.StepRejected
	}
	if rejected != (ir.Outcome == allot.OutcomeRejected) {
		fail("outcome %s, but rejected approval: %v", ir.Outcome, rejected)
	}
	if !rejected {
		for _, s := range p.Steps {
			has := recorded[s.Name]
			if s.Kind.Remote() {
				has = slices.ContainsFunc(ir.Tasks, func(tk ledger.ImportTask) bool { return tk.Step == s.Name })
			}
			if !has {
				fail("step %s of a completed run is missing", s.Name)
			}
		}
	}

	// Files: absolute sources with their sha256, each landing in one place.
	for _, fl := range pr.files {
		if !filepath.IsAbs(fl.src) || !fuzzSHA256.MatchString(fl.sha256) || fl.name == "" {
			fail("file %+v", fl)
		}
		if (fl.task >= 0) == (fl.step >= 0) || fl.task >= len(ir.Tasks) || fl.step >= len(ir.Steps) {
			fail("file %+v lands nowhere or twice", fl)
		}
	}
	placed := pr
	placed.rec.Tasks = slices.Clone(pr.rec.Tasks)
	placed.rec.Steps = slices.Clone(pr.rec.Steps)
	for i := range placed.rec.Steps {
		placed.rec.Steps[i].Outputs = slices.Clone(pr.rec.Steps[i].Outputs)
	}
	placed.placeFiles("/data/artifacts/" + p.Name + "/e")
	for _, tk := range placed.rec.Tasks {
		if (tk.Artifact == "") != (tk.SHA256 == "") {
			fail("task %s artifact %q sha256 %q", tk.Step, tk.Artifact, tk.SHA256)
		}
	}
	for _, sr := range placed.rec.Steps {
		for _, o := range sr.Outputs {
			if o.Path == "" || !fuzzSHA256.MatchString(o.SHA256) {
				fail("step %s output %+v", sr.Step, o)
			}
		}
	}
}

// encodable reports whether t is set and fits RFC 3339 (and JSON), as the
// ledger and the record's digest need.
func encodable(t time.Time) bool {
	return !t.IsZero() && t.Year() >= 0 && t.Year() <= 9999
}

// FuzzImportJSONLines: a JSON Lines file yields one record or one conflict
// per non-blank line, in order, each conflict naming its line; each record
// is the line decoded on its own; and the first record, laid out as a
// folder with a state.json, is the same record with the same digest.
func FuzzImportJSONLines(f *testing.F) {
	pipelines := fuzzPipelines(f)
	// One folder for every input (t.TempDir would make and remove one per
	// input): the fuzz function runs one input at a time per process.
	work := filepath.Join(f.TempDir(), "work")
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := filepath.Join(work, "source")
		if err := os.RemoveAll(work); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "fuzz.jsonl")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		recs, conflicts, err := readLegacy(path)
		if err != nil {
			t.Fatalf("readLegacy of a readable file: %v", err)
		}
		var lines []int
		for i, line := range bytes.Split(data, []byte("\n")) {
			if len(bytes.TrimSpace(line)) > 0 {
				lines = append(lines, i+1)
			}
		}
		rawLines := bytes.Split(data, []byte("\n"))
		if len(lines) == 0 {
			if len(recs) != 0 || len(conflicts) != 1 || !strings.Contains(conflicts[0].Detail, "holds no records") {
				t.Fatalf("a file without records: %v, %v", recs, conflicts)
			}
			return
		}
		if len(recs)+len(conflicts) != len(lines) {
			t.Fatalf("%d non-blank lines gave %d records and %d conflicts", len(lines), len(recs), len(conflicts))
		}
		seen := map[int]bool{}
		firstLine := 0
		for _, r := range recs {
			var n int
			if _, err := fmt.Sscanf(r.origin, "fuzz.jsonl line %d", &n); err != nil || !slices.Contains(lines, n) || seen[n] {
				t.Fatalf("record origin %q", r.origin)
			}
			seen[n] = true
			if firstLine == 0 {
				firstLine = n
			}
			line := bytes.TrimSpace(rawLines[n-1])
			if want, err := decodeLegacy(line); err != nil || !reflect.DeepEqual(want, r.rec) {
				t.Fatalf("line %d read as %+v, decoded alone as %+v, %v", n, r.rec, want, err)
			}
			if r.source != path || r.base != dir {
				t.Fatalf("record of line %d: source %q, base %q", n, r.source, r.base)
			}
		}
		for _, c := range conflicts {
			var n int
			if _, err := fmt.Sscanf(c.Detail, "fuzz.jsonl line %d:", &n); err != nil || !slices.Contains(lines, n) || seen[n] || c.Kind != ledger.ConflictInvalidRecord {
				t.Fatalf("conflict %+v does not name its line", c)
			}
			seen[n] = true
		}
		if len(recs) == 0 || !oldIDPattern.MatchString(recs[0].rec.OldID) {
			return
		}

		// The folder form: <old id>/state.json, old_id left out.
		first := recs[0]
		folders := filepath.Join(work, "state")
		folder := filepath.Join(folders, first.rec.OldID)
		if err := os.MkdirAll(folder, 0o755); err != nil {
			t.Fatal(err)
		}
		line := bytes.TrimSpace(rawLines[firstLine-1])
		if err := os.WriteFile(filepath.Join(folder, legacyStateFile), line, 0o644); err != nil {
			t.Fatal(err)
		}
		drecs, dconflicts, err := readLegacy(folders)
		if err != nil || len(dconflicts) != 0 || len(drecs) != 1 || !reflect.DeepEqual(drecs[0].rec, first.rec) || drecs[0].base != folder {
			t.Fatalf("the folder form of %q: %+v, %v, %v", line, drecs, dconflicts, err)
		}
		for _, p := range pipelines {
			a, ca := planRecord(p, first, fuzzImportNow)
			b, cb := planRecord(p, drecs[0], fuzzImportNow)
			if (len(ca) == 0) != (len(cb) == 0) || a.rec.Digest != b.rec.Digest {
				t.Fatalf("pipeline %s: the record and its folder form plan differently: %s %v, %s %v", p.Name, a.rec.Digest, ca, b.rec.Digest, cb)
			}
		}
	})
}
