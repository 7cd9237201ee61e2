// Package importer brings the runs of the old system into the ledger
// (starter import): it reads the legacy records, plans each as an episode
// of a pipeline, copies their files, and imports them in one transaction.
package importer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"allot"
	"allot/artifacts"
	"allot/internal/ledger"
	"allot/pipeline"
)

// ImportInput is one starter import.
type ImportInput struct {
	Pipeline string
	// From is a JSON Lines file of legacy records, or a folder with one
	// folder per old ID holding a state.json.
	From string
	// DryRun checks everything and says what would be imported, writing
	// nothing (the ledger may be opened read-only).
	DryRun bool
	// InPlace records the artifact files where they are instead of
	// copying them into DataDir/artifacts/<pipeline>/<episode>/.
	InPlace bool
	DataDir string
	// OverCap imports episodes beyond the pipeline's
	// max_episodes_per_period (refused without it); each such episode's
	// metadata records it.
	OverCap bool
	// OverBudget is why imported costs may take a budget's period over its
	// limit (refused without it; docs/budgets.md); By is who allows it.
	// Each episode whose costs count in such a period records both.
	OverBudget string
	By         string
	// Now bounds the nominal times (the pipeline's window) and stamps
	// the import; zero means now.
	Now time.Time
}

// ImportResult says what an import did (or, dry, would do). On refusal OK
// is false, Conflicts lists every conflict and nothing was written.
type ImportResult struct {
	Pipeline  string                  `json:"pipeline"`
	Source    string                  `json:"source"`
	DryRun    bool                    `json:"dry_run"`
	InPlace   bool                    `json:"in_place"`
	OverCap   bool                    `json:"over_cap"`
	OK        bool                    `json:"ok"`
	Imported  []ImportedEpisode       `json:"imported"` // new episodes, in nominal-time order
	Skipped   []ImportedEpisode       `json:"skipped"`  // imported before with the same data
	Conflicts []ledger.ImportConflict `json:"conflicts"`
	// Totals of the new episodes: references (paid and effect tasks),
	// artifact files and costs by currency (minor units).
	References int              `json:"references"`
	Artifacts  int              `json:"artifacts"`
	Costs      map[string]int64 `json:"costs"`
	Error      string           `json:"error,omitempty"`
	// OverBudget lists the budget periods the new episodes' costs take
	// over their limits: refused without --over-budget, imported with it.
	OverBudget []ledger.ImportOverBudget `json:"over_budget"`
	// Next, when the only conflicts are periods over the pipeline's cap or
	// over budgets, is the command that imports them anyway (--over-cap,
	// --over-budget).
	Next string `json:"next,omitempty"`
}

// ImportedEpisode is the episode one old run became.
type ImportedEpisode struct {
	OldID         string    `json:"old_id"`
	EpisodeID     string    `json:"episode_id"`
	Period        string    `json:"period"`
	Sequence      int       `json:"sequence"`
	AllocationKey string    `json:"allocation_key"`
	NominalTime   time.Time `json:"nominal_time"`
	Outcome       string    `json:"outcome,omitempty"`
	// Scheduled: the old run was its nominal time's scheduled run, and
	// its episode holds that time's key (AllocationKey).
	Scheduled bool `json:"scheduled"`
	// OverCap: imported beyond the pipeline's cap, with --over-cap.
	OverCap bool `json:"over_cap,omitempty"`
	// OverBudget: its costs count in a budget period the import takes
	// over its limit, with --over-budget.
	OverBudget bool     `json:"over_budget,omitempty"`
	References int      `json:"references"`
	Artifacts  int      `json:"artifacts"`
	Notes      []string `json:"notes,omitempty"`
}

// beforeImportCommit, when set (by tests), runs after the files are
// copied and before the ledger's transaction.
var beforeImportCommit func()

// importAttempts bounds how often an import is planned again when runs
// allocate in its periods while it copies files.
const importAttempts = 3

// Import turns the legacy records at in.From into episodes of the pipeline
// (docs/import-and-check.md, "Import"), paying nothing: no vendor is contacted. It is all or
// nothing and can be run again:
//
//  1. every record is read and checked against the pipeline's plan;
//  2. the ledger plans the import (which old IDs are new, their episodes,
//     every conflict with what it holds) in a read-only transaction;
//  3. every new record's artifact files are hashed and compared with the
//     record, and (copying) every destination is checked;
//  4. any conflict refuses the whole import, listing all of them, with
//     nothing written; a dry run stops here either way;
//  5. the files are copied to their final names durably (temporary file,
//     fsync, rename, directory fsync), verified again as they are copied;
//  6. the ledger writes every episode in one transaction under the
//     pipeline's lock. If it fails, the files step 5 wrote are removed
//     (unless the commit is found to have landed); if runs allocated in
//     the periods meanwhile, the import is planned again from step 2.
//
// A crash between 5 and 6 leaves only files no episode names, which the
// next run of the import finds in place and keeps. Old IDs imported before
// with the same data are skipped; with other data they are a conflict.
func Import(ctx context.Context, led *ledger.Ledger, pipelines *pipeline.Set, in ImportInput) (ImportResult, error) {
	res := ImportResult{Pipeline: in.Pipeline, DryRun: in.DryRun, InPlace: in.InPlace, OverCap: in.OverCap,
		Imported: []ImportedEpisode{}, Skipped: []ImportedEpisode{}, Conflicts: []ledger.ImportConflict{}, Costs: map[string]int64{},
		OverBudget: []ledger.ImportOverBudget{}}
	p, err := pipelines.Get(in.Pipeline)
	if err != nil {
		return res, err
	}
	if in.From == "" {
		return res, allot.Errorf(allot.InvalidInput, "import needs the source: a JSON Lines file or a folder of old IDs")
	}
	for _, t := range [][2]string{{"--over-budget", in.OverBudget}, {"--by", in.By}} {
		if err := allot.CheckText(t[0], t[1]); err != nil {
			return res, &allot.Error{Type: allot.InvalidInput, Message: err.Error()}
		}
	}
	from, err := filepath.Abs(in.From)
	if err != nil {
		return res, err
	}
	res.Source = from
	root := ""
	if !in.InPlace {
		if in.DataDir == "" {
			return res, allot.Errorf(allot.InvalidInput, "import copies the artifacts into the data folder: name it (--data-dir, ALLOT_DATA_DIR), or record them in place (--in-place)")
		}
		if root, err = filepath.Abs(filepath.Join(in.DataDir, "artifacts")); err != nil {
			return res, err
		}
	}
	now := in.Now
	if now.IsZero() {
		now = time.Now()
	}

	sources, invalid, err := readLegacy(from)
	if err != nil {
		return res, err
	}
	var planned []plannedRecord
	for _, src := range sources {
		pr, cs := planRecord(p, src, now)
		if len(cs) == 0 {
			cs = countInBudgets(pipelines, p, &pr)
		}
		if len(cs) > 0 {
			invalid = append(invalid, cs...)
			continue
		}
		planned = append(planned, pr)
	}

	for attempt := 1; ; attempt++ {
		conflicts := slices.Clone(invalid)
		batch := ledger.ImportBatch{Pipeline: p.Name, Plan: p.Plan(), KeyFor: allot.IdempotencyKey, DryRun: true, At: now,
			MaxPerPeriod: p.MaxPerPeriod, OverCap: in.OverCap, OverBudgetReason: in.OverBudget, OverBudgetBy: in.By}
		for _, pr := range planned {
			batch.Records = append(batch.Records, pr.rec)
		}
		plan, err := led.Import(ctx, batch)
		var ce *ledger.ImportConflictError
		switch {
		case errors.As(err, &ce):
			conflicts = append(conflicts, ce.Conflicts...)
		case err != nil:
			return res, err
		}
		res.OverBudget = append([]ledger.ImportOverBudget{}, plan.OverBudget...)
		// Files are checked for every record not skipped, so that a
		// refusal lists them with the ledger's conflicts.
		var fresh []int
		for i, ep := range plan.Episodes {
			if !ep.Skipped {
				fresh = append(fresh, i)
			}
		}
		var dirs map[int]string // planned index -> the episode's artifact folder
		conflicts = append(conflicts, verifyFiles(planned, fresh)...)
		if root != "" {
			dirs = map[int]string{}
			for _, i := range fresh {
				if id := plan.Episodes[i].EpisodeID; id != "" { // "": refused by the ledger already
					dirs[i] = artifacts.EpisodeDir(root, p.Name, id)
				}
			}
			conflicts = append(conflicts, checkDestinations(planned, dirs)...)
		}
		if len(conflicts) > 0 {
			res.Conflicts = conflicts
			err := &ledger.ImportConflictError{Conflicts: conflicts}
			res.Error = err.Error()
			res.Next = overrideCommand(in, from, conflicts)
			return res, err
		}
		if err := fillImportResult(&res, planned, plan); err != nil {
			return res, err
		}
		if in.DryRun {
			res.OK = true
			return res, nil
		}

		// Final paths and the episodes the files are made for.
		for _, i := range fresh {
			planned[i].placeFiles(dirs[i])
			planned[i].rec.EpisodeID = plan.Episodes[i].EpisodeID
			batch.Records[i] = planned[i].rec
		}
		written, err := copyFiles(planned, fresh, dirs)
		if err != nil {
			written.remove()
			return res, err
		}
		if beforeImportCommit != nil {
			beforeImportCommit()
		}
		batch.DryRun = false
		_, err = led.Import(ctx, batch)
		if err == nil || landed(ctx, led, p.Name, planned, fresh) {
			res.OK = true
			return res, nil
		}
		written.remove()
		for _, i := range fresh {
			planned[i].rec.EpisodeID = ""
		}
		if errors.Is(err, ledger.ErrImportMoved) && attempt < importAttempts {
			continue
		}
		// Another writer bound a key or a reference since the plan: the
		// result lists what conflicts now, as a dry run would.
		if errors.As(err, &ce) {
			res.Conflicts, res.Error = ce.Conflicts, err.Error()
		}
		return res, err
	}
}

// overBudgetReason is the reason the printed --over-budget command gives;
// the operator may write their own.
const overBudgetReason = "the old system paid these costs"

// overrideCommand is the command that runs the refused import again with
// --over-cap and/or --over-budget, when the pipeline's cap and budgets'
// limits are all that refused it; "" otherwise.
func overrideCommand(in ImportInput, from string, conflicts []ledger.ImportConflict) string {
	kinds := map[string]bool{}
	for _, c := range conflicts {
		kinds[c.Kind] = true
	}
	overCap, overBudget := kinds[ledger.ConflictOverCap] && !in.OverCap, kinds[ledger.ConflictOverBudget] && in.OverBudget == ""
	delete(kinds, ledger.ConflictOverCap)
	delete(kinds, ledger.ConflictOverBudget)
	if len(kinds) > 0 || !overCap && !overBudget {
		return ""
	}
	var flags []string
	switch {
	case in.InPlace:
		flags = append(flags, "--in-place")
	case in.DataDir != "":
		if dir, err := filepath.Abs(in.DataDir); err == nil {
			flags = append(flags, "--data-dir "+allot.ShellQuote(dir))
		}
	}
	if in.DryRun {
		flags = append(flags, "--dry-run")
	}
	if overCap || in.OverCap {
		flags = append(flags, "--over-cap")
	}
	if reason := in.OverBudget; overBudget || reason != "" {
		if reason == "" {
			reason = overBudgetReason
		}
		flags = append(flags, "--over-budget "+allot.ShellQuote(reason))
		if in.By != "" {
			flags = append(flags, "--by "+allot.ShellQuote(in.By))
		}
	}
	return allot.ImportCommand(in.Pipeline, from, flags...)
}

// countInBudgets gives each cost of a planned record the budgets that
// cover its step, in the period of the record's nominal time in each
// budget's zone, so that the import counts it there (docs/budgets.md). A
// cost in another currency than such a budget's is refused with its line:
// amounts are never converted.
func countInBudgets(set *pipeline.Set, p *pipeline.Pipeline, pr *plannedRecord) []ledger.ImportConflict {
	var out []ledger.ImportConflict
	for i := range pr.rec.Tasks {
		t := &pr.rec.Tasks[i]
		st, ok := p.Step(t.Step)
		if t.Currency == "" || !ok {
			continue
		}
		for _, b := range set.BudgetsFor(p.Name, st) {
			if t.Currency != b.Limit.Currency {
				out = append(out, invalidRecord(pr.rec.OldID, "%s: cost of %q is %s, but step %s counts against budget %s, which is in %s, and amounts are never converted: give the cost in %s as the vendor billed it, or leave this run out of the source",
					pr.src.origin, t.RemoteRef, allot.Money{Amount: t.Amount, Currency: t.Currency}, st.Name, b.Name, b.Limit.Currency, b.Limit.Currency))
				continue
			}
			t.Budgets = append(t.Budgets, ledger.ImportBudget{BudgetLimit: ledger.LimitOf(b), Period: b.PeriodOf(pr.rec.NominalTime)})
		}
	}
	return out
}

// fillImportResult lists the planned episodes and their totals.
func fillImportResult(res *ImportResult, planned []plannedRecord, plan ledger.ImportResult) error {
	res.Imported, res.Skipped, res.References, res.Artifacts = []ImportedEpisode{}, []ImportedEpisode{}, 0, 0
	res.Costs = map[string]int64{}
	for i, ep := range plan.Episodes {
		pr := planned[i]
		out := ImportedEpisode{OldID: ep.OldID, EpisodeID: ep.EpisodeID, Period: ep.Period, Sequence: ep.Sequence,
			AllocationKey: ep.AllocationKey, NominalTime: ep.NominalTime, Scheduled: ep.Scheduled, OverCap: ep.OverCap, OverBudget: ep.OverBudget}
		if ep.Skipped {
			res.Skipped = append(res.Skipped, out)
			continue
		}
		out.Outcome, out.Artifacts, out.Notes = string(pr.rec.Outcome), len(pr.files), slices.Clone(pr.notes)
		if !ep.Scheduled {
			out.Notes = append(out.Notes, fmt.Sprintf("not a scheduled run (\"scheduled\": false): key %s binds no nominal time; a run for %s allocates its own episode",
				ep.AllocationKey, ep.NominalTime.Format(time.RFC3339)))
		}
		if ep.OverCap {
			out.Notes = append(out.Notes, "beyond the pipeline's max_episodes_per_period: imported with --over-cap, as its metadata records")
		}
		if ep.OverBudget {
			out.Notes = append(out.Notes, "its costs take a budget period over its limit: imported with --over-budget, as its metadata records (who and why)")
		}
		for _, t := range pr.rec.Tasks {
			if t.RemoteRef != "" {
				out.References++
			}
			if t.Currency != "" {
				if err := allot.AddTo(res.Costs, allot.Money{Amount: t.Amount, Currency: t.Currency}); err != nil {
					return fmt.Errorf("the import's costs: %w", err)
				}
			}
		}
		res.References += out.References
		res.Artifacts += out.Artifacts
		res.Imported = append(res.Imported, out)
	}
	slices.SortStableFunc(res.Imported, func(a, b ImportedEpisode) int { return a.NominalTime.Compare(b.NominalTime) })
	return nil
}

// verifyFiles hashes every artifact of the new records.
func verifyFiles(planned []plannedRecord, fresh []int) []ledger.ImportConflict {
	var out []ledger.ImportConflict
	for _, i := range fresh {
		pr := planned[i]
		for _, f := range pr.files {
			sum, err := artifacts.SHA256File(f.src)
			switch {
			case err != nil:
				out = append(out, ledger.ImportConflict{Kind: ledger.ConflictArtifactMissing, OldID: pr.rec.OldID,
					Detail: fmt.Sprintf("%s: artifact %s cannot be read: %v", pr.src.origin, f.src, err)})
			case sum != f.sha256:
				out = append(out, ledger.ImportConflict{Kind: ledger.ConflictHashMismatch, OldID: pr.rec.OldID,
					Detail: fmt.Sprintf("%s: artifact %s has sha256 %s, the record says %s: the file changed since the old run, or the record is wrong", pr.src.origin, f.src, sum, f.sha256)})
			}
		}
	}
	return out
}

// checkDestinations refuses a copy onto a file that is not the artifact.
// The same file already in place (left by an import that crashed before
// its commit) is kept.
func checkDestinations(planned []plannedRecord, dirs map[int]string) []ledger.ImportConflict {
	var out []ledger.ImportConflict
	for i, dir := range dirs {
		pr := planned[i]
		for _, f := range pr.files {
			dest := filepath.Join(dir, f.name)
			st, err := os.Lstat(dest)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err == nil && st.Mode().IsRegular() {
				if sum, err := artifacts.SHA256File(dest); err == nil && sum == f.sha256 {
					continue
				}
			}
			out = append(out, ledger.ImportConflict{Kind: ledger.ConflictArtifactExists, OldID: pr.rec.OldID,
				Detail: fmt.Sprintf("%s already exists and is not the record's file (sha256 %s); no imported episode names it: move it away and import again", dest, f.sha256)})
		}
	}
	slices.SortFunc(out, func(a, b ledger.ImportConflict) int { return strings.Compare(a.Detail, b.Detail) })
	return out
}

// writtenFiles are the files and folders an import created, to remove if
// its commit fails.
type writtenFiles struct {
	files, dirs []string
}

func (w writtenFiles) remove() {
	for _, f := range w.files {
		_ = os.Remove(f)
	}
	// Deepest first; a folder that is not empty stays.
	slices.SortFunc(w.dirs, func(a, b string) int { return len(b) - len(a) })
	for _, d := range w.dirs {
		_ = os.Remove(d)
	}
}

// copyFiles copies the new records' artifacts into their episodes'
// folders, durably, each verified against its sha256 as it is written.
// Nothing is copied in place (dirs nil).
func copyFiles(planned []plannedRecord, fresh []int, dirs map[int]string) (writtenFiles, error) {
	var w writtenFiles
	if dirs == nil {
		return w, nil
	}
	for _, i := range fresh {
		dir := dirs[i]
		// The folders this import creates: the missing ancestors.
		for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
			if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
				break
			}
			if !slices.Contains(w.dirs, d) {
				w.dirs = append(w.dirs, d)
			}
		}
		for _, f := range planned[i].files {
			dest := filepath.Join(dir, f.name)
			if _, err := os.Lstat(dest); err == nil {
				continue // the same file, checked by checkDestinations
			}
			if err := copyFile(f.src, dest, f.sha256); err != nil {
				return w, fmt.Errorf("copy artifact %s of old ID %s to %s: %w; nothing was imported", f.src, planned[i].rec.OldID, dest, err)
			}
			w.files = append(w.files, dest)
		}
	}
	return w, nil
}

func copyFile(src, dest, sha256 string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = artifacts.WriteVerified(dest, f, sha256)
	return err
}

// landed reports whether an import whose commit returned an error was
// committed all the same (the connection dropped after COMMIT reached the
// server): every new old ID is there with its digest, as the episode its
// files were written for.
func landed(ctx context.Context, led *ledger.Ledger, pipelineName string, planned []plannedRecord, fresh []int) bool {
	metas, err := led.Imports(ctx, pipelineName)
	if err != nil || len(fresh) == 0 {
		return false
	}
	have := map[string]ledger.ImportMeta{}
	for _, m := range metas {
		have[m.OldID] = m
	}
	for _, i := range fresh {
		r := planned[i].rec
		if m := have[r.OldID]; m.Digest != r.Digest || m.EpisodeID != r.EpisodeID {
			return false
		}
	}
	return true
}
