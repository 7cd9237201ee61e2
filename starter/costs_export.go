package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"allot/internal/ledger"
	"allot/internal/report"
	"allot/pipeline"
)

// costsExport is `costs export`: the ledger's costs in a window as FOCUS
// CSV (docs/operating.md, "Costs in FOCUS"), to stdout or a new file.
func costsExport(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("costs export", false)
	var (
		in                   report.FOCUSInput
		format, since, until string
		out                  string
	)
	fs.StringVar(&format, "format", "focus", "the format: focus (FinOps FOCUS "+report.FOCUSVersion+" CSV), the only one")
	fs.StringVar(&since, "since", "", "costs recorded at or after this time, RFC3339 (required)")
	fs.StringVar(&until, "until", "", "costs recorded before this time, RFC3339 (default now)")
	fs.StringVar(&in.Pipeline, "pipeline", "", "only this pipeline's costs (default every pipeline's)")
	fs.StringVar(&out, "out", "", "write to this new file instead of stdout (an existing file is refused, never overwritten)")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if format != "focus" {
		return usageError{fmt.Errorf("--format %q: the one format is focus (FinOps FOCUS %s CSV)", format, report.FOCUSVersion)}
	}
	if since == "" {
		return usageError{errors.New("--since is required: starter costs export --since 2026-08-01T00:00:00Z [--until 2026-09-01T00:00:00Z]")}
	}
	var err error
	if in.Since, err = time.Parse(time.RFC3339, since); err != nil {
		return usageError{fmt.Errorf("--since %q is not RFC3339: write it like 2026-08-01T00:00:00Z", since)}
	}
	in.Until = time.Now()
	if until != "" {
		if in.Until, err = time.Parse(time.RFC3339, until); err != nil {
			return usageError{fmt.Errorf("--until %q is not RFC3339: write it like 2026-09-01T00:00:00Z", until)}
		}
	}
	if !in.Since.Before(in.Until) {
		return usageError{fmt.Errorf("--since %s is not before --until %s: give a window", in.Since.Format(time.RFC3339), in.Until.Format(time.RFC3339))}
	}
	w, done := c.stdout, func(bool) error { return nil }
	if _, err := os.Stat(out); out != "" && err == nil {
		return usageError{fmt.Errorf("--out %s exists: the export never overwrites a file; choose a new one, or remove it first", out)}
	}
	if out != "" {
		// Written aside and linked into place at the end: a refused or
		// failed export leaves no half file, and never replaces one.
		f, err := os.CreateTemp(filepath.Dir(out), ".costs-export-*")
		if err != nil {
			return fmt.Errorf("--out %s: %w", out, err)
		}
		w = f
		done = func(ok bool) error {
			defer os.Remove(f.Name())
			if !ok {
				return f.Close()
			}
			// On disk before it takes the name: a crash never leaves a
			// short file under it.
			if err := f.Sync(); err != nil {
				f.Close()
				return fmt.Errorf("--out %s: %w", out, err)
			}
			if err := f.Close(); err != nil {
				return fmt.Errorf("--out %s: %w", out, err)
			}
			if err := os.Link(f.Name(), out); err != nil {
				return fmt.Errorf("--out %s: %w: choose a new file, or remove that one first", out, err)
			}
			return nil
		}
	}
	res, err := askLedger(ctx, c, viewLedger, func(_ *pipeline.Set, led *ledger.Ledger) (report.FOCUSResult, error) {
		return report.ExportFOCUS(ctx, led, in, w)
	})
	if derr := done(err == nil); err == nil {
		err = derr
	}
	if err != nil {
		return err
	}
	if out != "" {
		c.print(res, func(w io.Writer) {
			fmt.Fprintf(w, "wrote %d cost(s) as FOCUS %s to %s\n", res.Rows, res.Version, out)
		})
	}
	return nil
}
