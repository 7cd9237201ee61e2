package importer

// The legacy format starter import reads (docs/import-and-check.md, "Import"): one JSON
// record per old run, as JSON Lines or as one folder per old ID holding a
// state.json. This file reads and checks records and turns each into the
// ledger's ImportRecord for a pipeline's plan.

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

// LegacyRecord is one old run.
type LegacyRecord struct {
	// OldID is the old system's ID of the run, e.g. a week "2026-W31". In
	// the directory form it defaults to the folder's name.
	OldID       string    `json:"old_id"`
	NominalTime time.Time `json:"nominal_time"`
	// Scheduled says whether the old run was the pipeline's scheduled run
	// for NominalTime (absent: it was). A scheduled run's episode is bound
	// to the key the Schedule, starter run and backfills form for its
	// time, so a later run for that time gets it back and pays nothing.
	// false: an extra run of its period; it keeps the key
	// <pipeline>/legacy/<old id> and binds no time.
	Scheduled *bool `json:"scheduled,omitempty"`
	// CompletedAt is when the run completed; a run whose last approval
	// was rejected may leave it out.
	CompletedAt time.Time         `json:"completed_at,omitzero"`
	References  []LegacyReference `json:"references,omitempty"`
	Approvals   []LegacyApproval  `json:"approvals,omitempty"`
	Costs       []LegacyCost      `json:"costs,omitempty"`
	Artifacts   []LegacyArtifact  `json:"artifacts,omitempty"`
}

// LegacyReference is one vendor task of a paid or effect step.
type LegacyReference struct {
	Step           string `json:"step"`
	Revision       int    `json:"revision,omitempty"` // 0 unless the old system reworked the step
	RemoteRef      string `json:"remote_ref"`
	IdempotencyKey string `json:"idempotency_key,omitempty"` // the vendor's key, where known
}

// LegacyApproval is one decision at an approval step.
type LegacyApproval struct {
	Step     string    `json:"step,omitempty"` // default: the plan's one approval step
	Decision string    `json:"decision"`       // "approved" or "rejected"
	By       string    `json:"by,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at,omitzero"` // default: the completion time
}

// LegacyCost is what the vendor charged for one reference.
type LegacyCost struct {
	RemoteRef string `json:"remote_ref"`
	Amount    int64  `json:"amount"`   // minor units, e.g. cents
	Currency  string `json:"currency"` // ISO 4217, e.g. "USD"
}

// LegacyArtifact is one file a step produced, with its sha256.
type LegacyArtifact struct {
	Step string `json:"step"`
	// Revision is the paid step's revision the file is the result of
	// (default: its highest); other steps' files have none.
	Revision *int `json:"revision,omitempty"`
	// Path is the file, relative to the JSON Lines file's folder (or the
	// old ID's folder), or absolute.
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// legacyStateFile is the record's file in the directory form.
const legacyStateFile = "state.json"

// importReason is the outcome reason of every imported episode.
const importReason = "imported"

var (
	oldIDPattern  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:+@-]{0,127}$`)
	sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// sourceRecord is one record as read, with where it came from.
type sourceRecord struct {
	rec    LegacyRecord
	origin string // for messages: "state.jsonl line 3", ".../2026-W31/state.json"
	source string // the file it was read from, kept as import metadata
	base   string // the folder relative artifact paths start from
}

// readLegacy reads the records at from (absolute): a JSON Lines file or a
// folder of old IDs. Records that cannot be read are conflicts; an error is
// something else (from unreadable).
func readLegacy(from string) ([]sourceRecord, []ledger.ImportConflict, error) {
	st, err := os.Stat(from)
	if err != nil {
		return nil, nil, fmt.Errorf("read the import source: %w: name a JSON Lines file or a folder with one folder per old ID", err)
	}
	if st.IsDir() {
		return readLegacyDir(from)
	}
	f, err := os.Open(from)
	if err != nil {
		return nil, nil, fmt.Errorf("read the import source: %w", err)
	}
	defer f.Close()
	var (
		out       []sourceRecord
		conflicts []ledger.ImportConflict
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 64<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		origin := fmt.Sprintf("%s line %d", filepath.Base(from), n)
		rec, err := decodeLegacy(line)
		if err != nil {
			conflicts = append(conflicts, invalidRecord(rec.OldID, "%s: %v", origin, err))
			continue
		}
		out = append(out, sourceRecord{rec: rec, origin: origin, source: from, base: filepath.Dir(from)})
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", from, err)
	}
	if len(out) == 0 && len(conflicts) == 0 {
		conflicts = append(conflicts, invalidRecord("", "%s holds no records: write one JSON record per line", from))
	}
	return out, conflicts, nil
}

func readLegacyDir(dir string) ([]sourceRecord, []ledger.ImportConflict, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read the import source: %w", err)
	}
	var (
		out       []sourceRecord
		conflicts []ledger.ImportConflict
	)
	for _, e := range entries { // sorted by name
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		folder := filepath.Join(dir, e.Name())
		path := filepath.Join(folder, legacyStateFile)
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			conflicts = append(conflicts, invalidRecord(e.Name(), "folder %s has no %s: every folder of the source is one old run", folder, legacyStateFile))
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", path, err)
		}
		rec, err := decodeLegacy(data)
		switch {
		case err != nil:
			conflicts = append(conflicts, invalidRecord(e.Name(), "%s: %v", path, err))
			continue
		case rec.OldID == "":
			rec.OldID = e.Name()
		case rec.OldID != e.Name():
			conflicts = append(conflicts, invalidRecord(rec.OldID, "%s says old ID %q but lies in folder %q: the folder is named after the old ID", path, rec.OldID, e.Name()))
			continue
		}
		out = append(out, sourceRecord{rec: rec, origin: path, source: path, base: folder})
	}
	if len(out) == 0 && len(conflicts) == 0 {
		conflicts = append(conflicts, invalidRecord("", "%s holds no folder with a %s: lay the source out as one folder per old ID", dir, legacyStateFile))
	}
	return out, conflicts, nil
}

// decodeLegacy decodes one record; unknown fields are errors, so that a
// misspelt field never silently drops data.
func decodeLegacy(data []byte) (LegacyRecord, error) {
	var rec LegacyRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return rec, fmt.Errorf("not a record: %w (times are RFC 3339, e.g. 2026-07-27T02:00:00Z)", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return rec, errors.New("more than one JSON value: one record per line (or per state.json)")
	}
	return rec, nil
}

func invalidRecord(oldID, format string, args ...any) ledger.ImportConflict {
	return ledger.ImportConflict{Kind: ledger.ConflictInvalidRecord, OldID: oldID, Detail: fmt.Sprintf(format, args...)}
}

// plannedRecord is a checked record, ready for the ledger but for its
// files' final paths, which depend on the episode the import assigns.
type plannedRecord struct {
	src   sourceRecord
	rec   ledger.ImportRecord
	files []plannedFile
	notes []string
}

// plannedFile is one artifact of a record.
type plannedFile struct {
	src    string // absolute path of the source file
	sha256 string
	name   string // its name in the episode's folder
	task   int    // index in rec.Tasks, or -1
	step   int    // index in rec.Steps, or -1
	output int    // index in that step record's outputs
}

// placeFiles sets the record's file paths: under dir (the episode's
// artifact folder), or where they are when dir is "".
func (pr *plannedRecord) placeFiles(dir string) {
	for _, f := range pr.files {
		path := f.src
		if dir != "" {
			path = filepath.Join(dir, f.name)
		}
		if f.task >= 0 {
			pr.rec.Tasks[f.task].Artifact, pr.rec.Tasks[f.task].SHA256 = path, f.sha256
			continue
		}
		s := &pr.rec.Steps[f.step]
		s.Outputs[f.output] = ledger.StepOutput{Path: path, SHA256: f.sha256}
		if f.output == 0 {
			s.Artifact, s.SHA256 = path, f.sha256
		}
	}
}

// planRecord checks a record against the pipeline's plan and builds its
// ledger record: every reference a succeeded paid task (with its cost, and
// its artifact), every approval a decision and the approval step's record,
// every other step a completed record (with its artifacts as outputs). A
// paid or effect step the record has no reference for is imported
// abandoned, an approval step without a decision too, with a note.
func planRecord(p *pipeline.Pipeline, src sourceRecord, now time.Time) (plannedRecord, []ledger.ImportConflict) {
	rec := src.rec
	var conflicts []ledger.ImportConflict
	bad := func(format string, args ...any) {
		conflicts = append(conflicts, invalidRecord(rec.OldID, "%s: %s", src.origin, fmt.Sprintf(format, args...)))
	}
	if !oldIDPattern.MatchString(rec.OldID) {
		bad("old_id %q: use 1-128 letters, digits and . _ : + @ -, starting with a letter or digit", rec.OldID)
		return plannedRecord{}, conflicts
	}
	if err := p.CheckNominalTime(rec.NominalTime, now); err != nil {
		bad("nominal_time: %v", err)
	}
	rec.NominalTime, rec.CompletedAt = rec.NominalTime.UTC(), rec.CompletedAt.UTC()
	if !rec.CompletedAt.IsZero() && !inRFC3339Years(rec.CompletedAt) {
		bad("completed_at is %s in UTC: give a time of the years 0000-9999", rec.CompletedAt.Format(time.RFC3339))
	}
	// The old system could not finish a run before the time it was
	// planned for: a record that says so is wrong somewhere.
	if !rec.CompletedAt.IsZero() && rec.CompletedAt.Before(rec.NominalTime) {
		bad("completed_at %s is before nominal_time %s: a run completes after the time it was planned for; correct either time",
			rec.CompletedAt.Format(time.RFC3339), rec.NominalTime.Format(time.RFC3339))
	}

	// References.
	refs := map[string][]LegacyReference{} // by step
	refStep := map[string]pipeline.Step{}  // by remote reference
	named := map[string]bool{}             // every reference named, accepted or not
	for i := range rec.References {
		r := &rec.References[i]
		named[r.RemoteRef] = true
		s, ok := p.Step(r.Step)
		switch {
		case !ok:
			bad("reference %q names step %q, which pipeline %s does not have (its steps: %s)", r.RemoteRef, r.Step, p.Name, strings.Join(p.StepNames(), ", "))
			continue
		case !s.Kind.Remote():
			bad("reference %q names %s step %s: only paid and effect steps have vendor references", r.RemoteRef, s.Kind, s.Name)
			continue
		case r.RemoteRef == "" || strings.ContainsAny(r.RemoteRef, " \t\r\n"):
			bad("step %s has reference %q: a remote reference is the vendor's task ID, without spaces", s.Name, r.RemoteRef)
			continue
		case r.Revision < 0:
			bad("reference %q has revision %d: revisions count from 0", r.RemoteRef, r.Revision)
			continue
		case strings.ContainsAny(r.IdempotencyKey, " \t\r\n"):
			bad("reference %q has idempotency key %q, with spaces", r.RemoteRef, r.IdempotencyKey)
			continue
		}
		if _, dup := refStep[r.RemoteRef]; dup {
			bad("reference %q appears twice: one vendor task is one reference", r.RemoteRef)
			continue
		}
		if slices.ContainsFunc(refs[s.Name], func(o LegacyReference) bool { return o.Revision == r.Revision }) {
			bad("step %s revision %d has two references: give each rework its own revision", s.Name, r.Revision)
			continue
		}
		refs[s.Name] = append(refs[s.Name], *r)
		refStep[r.RemoteRef] = s
	}

	// Costs.
	costs := map[string]LegacyCost{}
	costed := map[string]bool{}
	for _, c := range rec.Costs {
		s, ok := refStep[c.RemoteRef]
		costed[c.RemoteRef] = true
		switch {
		case !named[c.RemoteRef]:
			bad("cost of %q: the record has no such reference; a cost belongs to one of its references", c.RemoteRef)
		case !ok:
			// Its reference was refused above.
		case s.Kind == allot.KindEffect:
			bad("cost of %q: it is effect step %s's reference, and an effect costs nothing", c.RemoteRef, s.Name)
		case c.Amount < 0:
			bad("cost of %q is %d: amounts are absolute, in minor units", c.RemoteRef, c.Amount)
		case c.Amount > allot.MaxAmount:
			bad("cost of %q is %d minor units (%s), above the bound of %s for one charge: amounts are minor units (cents); correct the amount",
				c.RemoteRef, c.Amount, allot.Money{Amount: c.Amount, Currency: c.Currency}, allot.Money{Amount: allot.MaxAmount, Currency: c.Currency})
		case allot.CheckCurrency(c.Currency) != nil:
			bad("cost of %q: %v", c.RemoteRef, allot.CheckCurrency(c.Currency))
		default:
			if _, dup := costs[c.RemoteRef]; dup {
				bad("reference %q has two costs: give its one absolute amount", c.RemoteRef)
			}
			costs[c.RemoteRef] = c
		}
	}
	for _, r := range rec.References { // in the record's order, not a map's
		ref := r.RemoteRef
		if s, ok := refStep[ref]; ok && !costed[ref] && s.Kind == allot.KindPaid {
			costed[ref] = true // once per reference
			bad("reference %q of paid step %s has no cost: add {\"remote_ref\": %q, \"amount\": N, \"currency\": \"USD\"} (amount 0 if it cost nothing)", ref, s.Name, ref)
		}
	}

	// Approvals.
	var approvalSteps []string
	for _, s := range p.Steps {
		if s.Kind.Gate() {
			approvalSteps = append(approvalSteps, s.Name)
		}
	}
	approvals := map[string][]LegacyApproval{}
	rejectedAt := ""
	for _, a := range rec.Approvals {
		if a.Step == "" {
			if len(approvalSteps) != 1 {
				bad("an approval names no step and pipeline %s has %d approval steps (%s): name it", p.Name, len(approvalSteps), strings.Join(approvalSteps, ", "))
				continue
			}
			a.Step = approvalSteps[0]
		}
		if s, ok := p.Step(a.Step); !ok || !s.Kind.Gate() {
			bad("approval names step %q, which is not an approval step of pipeline %s (those are: %s)", a.Step, p.Name, strings.Join(approvalSteps, ", "))
			continue
		}
		if a.Decision != string(allot.StepApproved) && a.Decision != string(allot.StepRejected) {
			bad("approval of %s has decision %q: use \"approved\" or \"rejected\"", a.Step, a.Decision)
			continue
		}
		if a.At.IsZero() {
			a.At = rec.CompletedAt
		}
		if a.At.IsZero() {
			bad("approval of %s has no time and the record no completed_at: give \"at\"", a.Step)
			continue
		}
		a.At = a.At.UTC()
		if !inRFC3339Years(a.At) {
			bad("approval of %s is at %s in UTC: give a time of the years 0000-9999", a.Step, a.At.Format(time.RFC3339))
			continue
		}
		if a.At.Before(rec.NominalTime) {
			bad("approval of %s at %s is before nominal_time %s: a run is approved after the time it was planned for; correct either time",
				a.Step, a.At.Format(time.RFC3339), rec.NominalTime.Format(time.RFC3339))
			continue
		}
		approvals[a.Step] = append(approvals[a.Step], a)
	}
	for _, name := range approvalSteps {
		as := approvals[name]
		slices.SortStableFunc(as, func(x, y LegacyApproval) int { return x.At.Compare(y.At) })
		if len(as) > 0 && as[len(as)-1].Decision == string(allot.StepRejected) && rejectedAt == "" {
			rejectedAt = name
		}
	}
	if rec.CompletedAt.IsZero() && rejectedAt == "" {
		bad("completed_at is missing: a run that was not rejected needs its completion time")
	}

	// Artifacts.
	type fileKey struct {
		step     string
		revision int
	}
	artifacts := map[fileKey][]LegacyArtifact{}
	var resolved []LegacyArtifact // with their revisions, for the digest
	names := map[string]string{}  // file name in the episode's folder -> its step
	for _, a := range rec.Artifacts {
		a.SHA256 = strings.ToLower(a.SHA256)
		s, ok := p.Step(a.Step)
		switch {
		case !ok:
			bad("artifact %q names step %q, which pipeline %s does not have", a.Path, a.Step, p.Name)
			continue
		case s.Kind == allot.KindApproval || s.Kind == allot.KindEffect:
			bad("artifact %q names %s step %s, which has no files", a.Path, s.Kind, s.Name)
			continue
		case a.Path == "":
			bad("an artifact of step %s has no path", s.Name)
			continue
		case !sha256Pattern.MatchString(a.SHA256):
			bad("artifact %q has sha256 %q: give the 64 hex digits of the file's SHA-256", a.Path, a.SHA256)
			continue
		}
		key := fileKey{step: s.Name}
		if s.Kind == allot.KindPaid {
			key.revision = -1
			for _, r := range refs[s.Name] {
				key.revision = max(key.revision, r.Revision)
			}
			if a.Revision != nil {
				key.revision = *a.Revision
			}
			if !slices.ContainsFunc(refs[s.Name], func(r LegacyReference) bool { return r.Revision == key.revision }) {
				bad("artifact %q of paid step %s is the result of revision %d, which has no reference: a paid result belongs to a vendor task", a.Path, s.Name, key.revision)
				continue
			}
			if len(artifacts[key]) > 0 {
				bad("paid step %s revision %d has two artifacts (%q, %q): a paid task has one result", s.Name, key.revision, artifacts[key][0].Path, a.Path)
				continue
			}
		} else if a.Revision != nil && *a.Revision != 0 {
			bad("artifact %q of %s step %s has revision %d: only paid steps' files have revisions", a.Path, s.Kind, s.Name, *a.Revision)
			continue
		}
		a.Revision = &key.revision
		artifacts[key] = append(artifacts[key], a)
		resolved = append(resolved, a)
		name := filepath.Base(a.Path)
		if s.Kind == allot.KindPaid {
			name = fmt.Sprintf("%s-r%d%s", s.Name, key.revision, filepath.Ext(name))
		}
		if other, dup := names[name]; dup {
			bad("artifact %q of step %s and one of step %s would both be %s in the episode's folder: rename one", a.Path, s.Name, other, name)
			continue
		}
		names[name] = s.Name
	}
	if len(conflicts) > 0 {
		return plannedRecord{}, conflicts
	}

	// A scheduled run (the default) binds the key every run for its
	// nominal time forms; any other run "legacy/<old id>" under the
	// pipeline's prefix, which no operator's key can take.
	scheduled := rec.Scheduled == nil || *rec.Scheduled
	key := allot.LegacyKey(p.Name, rec.OldID)
	if scheduled {
		key = allot.AllocationKey(p.Name, rec.NominalTime)
	}
	pr := plannedRecord{src: src}
	pr.rec = ledger.ImportRecord{
		OldID: rec.OldID, Source: src.source, Scheduled: scheduled, Key: key, Period: p.PeriodOf(rec.NominalTime),
		NominalTime: rec.NominalTime, Outcome: allot.OutcomeCompleted, Reason: importReason, CompletedAt: rec.CompletedAt,
	}
	if rejectedAt != "" {
		pr.rec.Outcome = allot.OutcomeRejected
		if rec.CompletedAt.IsZero() {
			as := approvals[rejectedAt]
			pr.rec.CompletedAt = as[len(as)-1].At
		}
	}
	abs := func(path string) string {
		if filepath.IsAbs(path) {
			return filepath.Clean(path)
		}
		return filepath.Join(src.base, path)
	}
	addFile := func(a LegacyArtifact, name string, task, step, output int) {
		pr.files = append(pr.files, plannedFile{src: abs(a.Path), sha256: a.SHA256, name: name, task: task, step: step, output: output})
	}
	stepDone := pr.rec.CompletedAt
	afterRejection := false
	for _, s := range p.Steps {
		named := len(refs[s.Name]) > 0 || len(approvals[s.Name]) > 0 || len(artifacts[fileKey{step: s.Name}]) > 0
		if afterRejection && !named {
			continue // a rejected run stopped at its approval
		}
		switch s.Kind {
		case allot.KindPaid, allot.KindEffect:
			rs := refs[s.Name]
			if len(rs) == 0 {
				pr.rec.Tasks = append(pr.rec.Tasks, ledger.ImportTask{Step: s.Name, State: allot.PaidAbandoned,
					Error: "imported: the old run has no reference for this step"})
				pr.notes = append(pr.notes, fmt.Sprintf("%s step %s: no reference in the record; imported as abandoned", s.Kind, s.Name))
				continue
			}
			slices.SortFunc(rs, func(x, y LegacyReference) int { return x.Revision - y.Revision })
			for _, r := range rs {
				c := costs[r.RemoteRef]
				pr.rec.Tasks = append(pr.rec.Tasks, ledger.ImportTask{Step: s.Name, Revision: r.Revision, State: allot.PaidSucceeded,
					RemoteRef: r.RemoteRef, IdempotencyKey: r.IdempotencyKey, Amount: c.Amount, Currency: c.Currency})
				for _, a := range artifacts[fileKey{step: s.Name, revision: r.Revision}] {
					addFile(a, fmt.Sprintf("%s-r%d%s", s.Name, r.Revision, filepath.Ext(filepath.Base(a.Path))), len(pr.rec.Tasks)-1, -1, 0)
				}
			}
			if s.Kind == allot.KindEffect {
				// An effect acts at its step record's revision.
				pr.rec.Steps = append(pr.rec.Steps, ledger.StepRecord{Step: s.Name, Status: allot.StepCompleted,
					Revision: rs[len(rs)-1].Revision, CompletedAt: stepDone})
			}
		case allot.KindApproval:
			as := approvals[s.Name]
			if len(as) == 0 {
				pr.rec.Steps = append(pr.rec.Steps, ledger.StepRecord{Step: s.Name, Status: allot.StepAbandoned, CompletedAt: stepDone})
				pr.notes = append(pr.notes, fmt.Sprintf("approval step %s: no decision in the record; imported as abandoned", s.Name))
				continue
			}
			for i, a := range as {
				reason := a.Reason
				if a.By != "" {
					reason = strings.TrimSuffix("by "+a.By+": "+a.Reason, ": ")
				}
				action := allot.ActionApprove
				if a.Decision == string(allot.StepRejected) {
					action = allot.ActionReject
				}
				pr.rec.Decisions = append(pr.rec.Decisions, ledger.OperatorDecision{
					RequestID: fmt.Sprintf("import:%s:%s:%d", rec.OldID, s.Name, i), Step: s.Name, Action: action, Reason: reason, At: a.At})
			}
			last := as[len(as)-1]
			pr.rec.Steps = append(pr.rec.Steps, ledger.StepRecord{Step: s.Name, Status: allot.StepStatus(last.Decision), CompletedAt: last.At})
			if s.Name == rejectedAt {
				afterRejection = true
			}
		default:
			sr := ledger.StepRecord{Step: s.Name, Status: allot.StepCompleted, CompletedAt: stepDone}
			for i, a := range artifacts[fileKey{step: s.Name}] {
				sr.Outputs = append(sr.Outputs, ledger.StepOutput{})
				addFile(a, filepath.Base(a.Path), -1, len(pr.rec.Steps), i)
			}
			pr.rec.Steps = append(pr.rec.Steps, sr)
		}
	}
	pr.rec.Digest = legacyDigest(rec, resolved)
	return pr, nil
}

// inRFC3339Years reports whether t, in UTC, has a four-digit year. A time
// written with an offset can leave that range in UTC
// (9999-12-31T23:59:59-23:59), and then neither RFC 3339 nor JSON holds it.
func inRFC3339Years(t time.Time) bool {
	y := t.UTC().Year()
	return y >= 0 && y <= 9999
}

// legacyDigest identifies a record's data: the same old run read again,
// from either form and whatever the order of its lists, has the same
// digest; any change to a value changes it.
func legacyDigest(rec LegacyRecord, artifacts []LegacyArtifact) string {
	c := rec
	c.References = slices.Clone(rec.References)
	slices.SortFunc(c.References, func(x, y LegacyReference) int {
		return cmp.Or(strings.Compare(x.Step, y.Step), x.Revision-y.Revision)
	})
	c.Costs = slices.Clone(rec.Costs)
	slices.SortFunc(c.Costs, func(x, y LegacyCost) int { return strings.Compare(x.RemoteRef, y.RemoteRef) })
	c.Approvals = nil
	for _, a := range rec.Approvals {
		a.At = a.At.UTC()
		c.Approvals = append(c.Approvals, a)
	}
	slices.SortStableFunc(c.Approvals, func(x, y LegacyApproval) int {
		return cmp.Or(strings.Compare(x.Step, y.Step), x.At.Compare(y.At))
	})
	// Files by step, revision, name and content; not by path, which
	// depends on the source's layout.
	c.Artifacts = nil
	for _, a := range artifacts {
		c.Artifacts = append(c.Artifacts, LegacyArtifact{Step: a.Step, Revision: a.Revision, Path: filepath.Base(a.Path), SHA256: a.SHA256})
	}
	slices.SortFunc(c.Artifacts, func(x, y LegacyArtifact) int {
		return cmp.Or(strings.Compare(x.Step, y.Step), *x.Revision-*y.Revision, strings.Compare(x.Path, y.Path), strings.Compare(x.SHA256, y.SHA256))
	})
	c.NominalTime, c.CompletedAt = rec.NominalTime.UTC(), rec.CompletedAt.UTC()
	// Absent and true are the same claim; records imported before the
	// field existed keep their digest.
	if c.Scheduled != nil && *c.Scheduled {
		c.Scheduled = nil
	}
	data, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("encode a legacy record: %v", err)) // strings, numbers and times always encode
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
