package main

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/internal/pipelinetest"
	"allot/internal/report"
)

// `starter costs export --format focus` writes the window's costs as FOCUS
// CSV, to stdout or a new file; an existing file is refused and left as it
// was; a format it does not write, or no --since, is a usage error.
func TestCostsExportWritesFOCUS(t *testing.T) {
	l := ledgertest.New(t)
	ctx := context.Background()
	ep := l.Allocate("weekly", ledgertest.BudgetMonday)
	ref := ledger.PaidTaskRef{Pipeline: "weekly", EpisodeID: ep.ID, Step: "video"}
	if _, err := l.Led.WriteIntent(ctx, ref, allot.IdempotencyKey("weekly", ep.ID, "video", 0), "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Led.RecordSubmission(ctx, ledger.Submission{PaidTaskRef: ref, RemoteRef: "vt_export", Amount: 1250, Currency: "USD"}); err != nil {
		t.Fatal(err)
	}
	l.Led.Close()
	dir := t.TempDir()
	t.Setenv("ALLOT_PIPELINES", pipelinetest.Write(t, dir, ledgertest.BudgetSet))
	t.Setenv("ALLOT_LEDGER", "sqlite:"+l.Path)
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)

	code, stdout, stderr := run(t, "costs", "export", "--format", "focus", "--since", since)
	if code != exitOK {
		t.Fatalf("export to stdout: exit %d %s", code, stderr)
	}
	rows, err := csv.NewReader(strings.NewReader(stdout)).ReadAll()
	if err != nil || len(rows) != 2 || rows[0][0] != report.FOCUSMandatory[0] || rows[1][0] != "12.50" || !strings.Contains(strings.Join(rows[1], ","), "vt_export") {
		t.Fatalf("stdout: %v, %v", rows, err)
	}
	out := filepath.Join(dir, "costs.csv")
	if code, stdout, stderr := run(t, "costs", "export", "--since", since, "--out", out); code != exitOK || !strings.Contains(stdout, "wrote 1 cost(s) as FOCUS 1.2 to "+out) {
		t.Fatalf("export to a file: exit %d %q %q", code, stdout, stderr)
	}
	written, err := os.ReadFile(out)
	if err != nil || string(written) != "" && !strings.HasPrefix(string(written), "BilledCost,") {
		t.Fatalf("the file: %q, %v", written, err)
	}
	if code, _, stderr := run(t, "costs", "export", "--since", since, "--out", out); code != exitUsage || !strings.Contains(stderr, "never overwrites") {
		t.Fatalf("an existing file: exit %d %s", code, stderr)
	}
	if again, _ := os.ReadFile(out); string(again) != string(written) {
		t.Fatal("a refused export changed the file")
	}
	for _, args := range [][]string{{"costs", "export", "--format", "csv", "--since", since}, {"costs", "export"}} {
		if code, _, stderr := run(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d %s, want a usage error", args, code, stderr)
		}
	}
}
