package app_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"allot"
	"allot/app"
	"allot/internal/ledger"
	"allot/internal/patience"
	"allot/internal/pipelinetest"
	"allot/paidvendor"
)

// reshapedPipelines is weekly-video under budget video-weekly, counted in
// currency per period.
func reshapedPipelines(currency, period string) string {
	return pipelinetest.Budgeted{Pipeline: "weekly-video", Currency: currency, Period: period}.TOML()
}

// Issue 24: a week had spent its 10.00 USD; the budget's currency (or its
// period) was then changed in the pipeline file, every period showed 0
// spent, and the week paid 5.00 more. The worker now refuses to start on
// such a file, before it connects to Temporal, naming the budget, the
// period with its money and the fix; with the budget as the spend was
// booked it starts (and only then fails to reach Temporal here).
func TestWorkerRefusesABudgetReshapedUnderItsSpend(t *testing.T) {
	dir := t.TempDir()
	url := "sqlite:" + filepath.Join(dir, "allot.db")
	ctx := context.Background()
	led, err := ledger.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	nominal := time.Date(2026, 8, 3, 9, 0, 0, 0, time.UTC)
	res, err := led.Allocate(ctx, ledger.AllocateInput{Pipeline: "weekly-video", Key: "weekly-video/k", Period: "2026-W32", NominalTime: nominal})
	if err != nil {
		t.Fatal(err)
	}
	ref := ledger.PaidTaskRef{Pipeline: "weekly-video", EpisodeID: res.Episode.ID, Step: "video"}
	if _, err := led.WriteIntentReserving(ctx, ref, allot.IdempotencyKey("weekly-video", res.Episode.ID, "video", 0), "attempt-1",
		[]allot.Reservation{{Budget: "video-weekly", Period: "2026-W32", Currency: "USD", Limit: 1000, Amount: 250}}); err != nil {
		t.Fatal(err)
	}
	led.Close()

	start := func(currency, period string) error {
		t.Helper()
		file := filepath.Join(dir, currency+"-"+period+".toml")
		body := reshapedPipelines(currency, period)
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := patience.Context(t, 30*time.Second)
		defer cancel()
		return app.RunWorker(ctx, app.WorkerConfig{
			Config:      app.Config{Ledger: url, DataDir: dir, Pipelines: file, VendorURL: "http://127.0.0.1:1"},
			Temporal:    client.Options{HostPort: "127.0.0.1:1"}, // reached only past the check
			Credentials: paidvendor.NewStaticCredentials("test-key"),
		})
	}
	for _, c := range []struct{ currency, period, says string }{
		{"EUR", "iso-week", `restore currency = "USD"`},
		{"USD", "month", `restore period = "iso-week"`},
	} {
		err := start(c.currency, c.period)
		for _, want := range []string{`budget "video-weekly"`, "2026-W32: 0.00 USD settled, 2.50 USD reserved", c.says, `name = "video-weekly-2"`} {
			if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "connect to Temporal") {
				t.Fatalf("a worker on budget video-weekly in %s per %s: %v\nwant a refusal before connecting, naming %q", c.currency, c.period, err, want)
			}
		}
	}
	if err := start("USD", "iso-week"); err == nil || !strings.Contains(err.Error(), "connect to Temporal") {
		t.Fatalf("a worker on the budget as booked: %v, want it past the check (and failing to reach Temporal)", err)
	}
}
