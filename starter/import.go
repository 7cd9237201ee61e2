package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"allot"
	"allot/app"
	"allot/internal/importer"
	"allot/internal/ledger"
	"allot/pipeline"
)

// importCommand: starter import --pipeline P --from PATH [--dry-run]
// [--in-place] [--over-cap] [--over-budget REASON [--by NAME]]. It never
// contacts a vendor.
func importCommand(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("import", false)
	var in importer.ImportInput
	fs.StringVar(&in.Pipeline, "pipeline", "", "pipeline the old runs become episodes of (required)")
	fs.StringVar(&in.From, "from", "", "a JSON Lines file of old runs, or a folder with one folder per old ID holding a state.json (required)")
	fs.BoolVar(&in.DryRun, "dry-run", false, "check everything and say what would be imported; write nothing")
	fs.BoolVar(&in.InPlace, "in-place", false, "record the artifact files where they are instead of copying them into the data folder")
	fs.BoolVar(&in.OverCap, "over-cap", false, "import old runs beyond the pipeline's max_episodes_per_period (refused without it); each such episode's import metadata records it")
	fs.StringVar(&in.OverBudget, "over-budget", "", "why the old runs' costs may take a budget's period over its limit (refused without it); each such episode's import metadata records it with --by")
	fs.StringVar(&in.By, "by", "", "who allows --over-budget (default $USER, else the operating system's user name)")
	fs.StringVar(&c.cfg.DataDir, "data-dir", c.cfg.DataDir, "artifacts are copied to DATA_DIR/artifacts/<pipeline>/<episode>/ (env "+app.EnvDataDir+", default data)")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if in.Pipeline == "" || in.From == "" {
		return usageError{errors.New("--pipeline and --from are required")}
	}
	if in.OverBudget != "" && strings.TrimSpace(in.OverBudget) == "" {
		return usageError{errors.New("--over-budget needs a reason and who gives it: --over-budget REASON --by NAME")}
	}
	// Who allows --over-budget; the remedy a refusal prints names them too.
	if by, err := allot.Actor(in.By); err == nil {
		in.By = by
	} else if strings.TrimSpace(in.OverBudget) != "" {
		return usageError{err}
	}
	in.DataDir = c.cfg.DataDir
	pipelines, err := c.pipelines()
	if err != nil {
		return err
	}
	if _, err := pipelines.Get(in.Pipeline); err != nil {
		return err
	}
	// A dry run writes nothing, not even a migration or a file beside
	// the ledger.
	access := writeLedger
	if in.DryRun {
		access = viewLedger
	}
	res, err := askLedger(ctx, c, access, func(set *pipeline.Set, led *ledger.Ledger) (importer.ImportResult, error) {
		return importer.Import(ctx, led, set, in)
	})
	var conflicts *ledger.ImportConflictError
	if err != nil && !errors.As(err, &conflicts) {
		return err
	}
	c.print(res, func(w io.Writer) { printImport(w, in, res, conflicts != nil) })
	if conflicts != nil {
		if !c.json {
			if res.Next != "" {
				fmt.Fprintf(c.stderr, "starter import: refused, nothing was written: if the old system did run those episodes and pay those costs, import them over the cap or budgets (the ledger records it):\n  %s\n", res.Next)
			} else {
				fmt.Fprintf(c.stderr, "starter import: refused, nothing was written: fix the source (or the ledger) and run it again\n")
			}
		}
		return errReported
	}
	return nil
}

// printImport writes what import did, or would do on a dry run; refused:
// the conflicts refused it, and res lists them.
func printImport(w io.Writer, in importer.ImportInput, res importer.ImportResult, refused bool) {
	if refused {
		fmt.Fprintf(w, "refused: %d conflict(s); nothing was written\n", len(res.Conflicts))
		for _, cf := range res.Conflicts {
			fmt.Fprintf(w, "%s\t%s\t%s\n", cf.Kind, dash(cf.OldID), cf.Detail)
		}
		return
	}
	verb := "imported"
	if res.DryRun {
		verb = "would import"
	}
	fmt.Fprintf(w, "%s %d old run(s) from %s into %s; %d already imported, skipped\n", verb, len(res.Imported), res.Source, res.Pipeline, len(res.Skipped))
	if len(res.Imported) > 0 {
		fmt.Fprintln(w, "OLD ID\tEPISODE\tNOMINAL TIME\tOUTCOME\tREFS\tFILES\tKEY")
		for _, e := range res.Imported {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", e.OldID, e.EpisodeID, e.NominalTime.Format(time.RFC3339), e.Outcome, e.References, e.Artifacts, e.AllocationKey)
			for _, n := range e.Notes {
				fmt.Fprintf(w, "\tnote:\t%s\n", n)
			}
		}
	}
	var costs []string
	for _, cur := range slices.Sorted(maps.Keys(res.Costs)) {
		costs = append(costs, money(res.Costs[cur], cur))
	}
	fmt.Fprintf(w, "references\t%d\nartifact files\t%d\ncosts\t%s\n", res.References, res.Artifacts, dash(strings.Join(costs, ", ")))
	for _, o := range res.OverBudget {
		fmt.Fprintf(w, "over budget\t%s (--over-budget by %s: %s)\n", o, in.By, in.OverBudget)
	}
}
