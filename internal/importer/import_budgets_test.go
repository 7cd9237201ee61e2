package importer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"allot"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/internal/report"
	"allot/pipeline"
)

// importBudgetSet is weekly-video with both paid steps under one weekly
// budget of limit USD cents.
func importBudgetSet(t *testing.T, limit int64) *pipeline.Set {
	t.Helper()
	set, err := pipeline.Parse(fmt.Appendf(nil, `
[[vendor]]
name        = "studio"
url         = "http://studio.invalid"
api_key_env = "STUDIO_API_KEY"

[[budget]]
name     = "video-weekly"
pipeline = "weekly-video"
period   = "iso-week"
limit    = { amount = %d, currency = "USD" }

[[pipeline]]
name = "weekly-video"
  [[pipeline.step]]
  name     = "video"
  kind     = "paid"
  max_cost = { amount = 250, currency = "USD" }
  [[pipeline.step]]
  name     = "cover"
  kind     = "paid"
  vendor   = "studio"
  max_cost = { amount = 40, currency = "USD" }
  [[pipeline.step]]
  name = "assemble"
  kind = "local"
`, limit), "test")
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// weekRecord is an old run of week 31 that cost 250 + 40 in currency.
func weekRecord(oldID, nominal, currency string, scheduled bool) string {
	return fmt.Sprintf(`{"old_id": %q, "nominal_time": %q, "completed_at": "2026-08-01T02:00:00Z", "scheduled": %v,`+
		` "references": [{"step": "video", "remote_ref": "vt_%s_v"}, {"step": "cover", "remote_ref": "vt_%s_c"}],`+
		` "costs": [{"remote_ref": "vt_%s_v", "amount": 250, "currency": %q}, {"remote_ref": "vt_%s_c", "amount": 40, "currency": "USD"}]}`,
		oldID, nominal, scheduled, oldID, oldID, oldID, currency, oldID)
}

// weekPeriod is what budget video-weekly holds in 2026-W31.
func weekPeriod(t *testing.T, led *ledger.Ledger, set *pipeline.Set) ledger.BudgetPeriod {
	t.Helper()
	b, _ := set.Budget("video-weekly")
	bp, err := led.BudgetPeriodOf(context.Background(), ledger.LimitOf(b), "2026-W31")
	if err != nil {
		t.Fatal(err)
	}
	return bp
}

// TestImportedCostsCountAgainstBudgets is issue 24's reproduction: 580
// imported into a week under a 750 budget is settled in it (budget list
// shows it, a new task's admission counts it); under a 500 budget the
// import is refused, dry or not, naming the period, writing nothing and
// printing the command that imports it anyway, which records who and why,
// and check then reports the period exceeded.
func TestImportedCostsCountAgainstBudgets(t *testing.T) {
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			url := ledgertest.DriverURL(t, driver)
			if url == "" {
				t.Skip("ALLOT_TEST_POSTGRES_DSN is not set")
			}
			ctx := context.Background()
			from := ledgertest.WriteSource(t, nil, weekRecord("w31a", "2026-07-27T02:00:00Z", "USD", true), weekRecord("w31b", "2026-07-30T02:00:00Z", "USD", true))

			t.Run("under the limit", func(t *testing.T) {
				led, set := ledgertest.Open(t, ledgertest.DriverURL(t, driver)), importBudgetSet(t, 750)
				res, err := Import(ctx, led, set, ImportInput{Pipeline: "weekly-video", From: from, InPlace: true})
				if err != nil || !res.OK || len(res.OverBudget) != 0 {
					t.Fatalf("import: %+v, %v", res, err)
				}
				list, err := report.Budgets(ctx, led, report.BudgetsInput{Pipelines: set, Budget: "video-weekly"})
				if err != nil {
					t.Fatal(err)
				}
				i := slices.IndexFunc(list.Budgets[0].Periods, func(p report.BudgetPeriodView) bool { return p.Period == "2026-W31" })
				if i < 0 || list.Budgets[0].Periods[i].Settled != 580 || list.Budgets[0].Periods[i].Free != 170 {
					t.Fatalf("budget list after the import: %+v; want 2026-W31 with 580 settled, 170 free", list.Budgets[0].Periods)
				}
				// A new week-31 video (250) does not fit in 170.
				short, err := led.BudgetRoom(ctx, ledger.PaidTaskRef{}, []allot.Reservation{{Budget: "video-weekly", Period: "2026-W31", Currency: "USD", Limit: 750, Amount: 250}})
				if err != nil || len(short) != 1 || short[0].Settled != 580 {
					t.Fatalf("room for 250 more: %+v, %v; want refused with 580 settled", short, err)
				}
				check, err := report.Audit(ctx, led, report.CheckInput{Pipelines: set})
				if err != nil || !check.OK {
					t.Fatalf("check after the import: %+v, %v", check.Violations, err)
				}
			})

			t.Run("over the limit", func(t *testing.T) {
				led, set := ledgertest.Open(t, url), importBudgetSet(t, 500)
				before := dumpLedger(t, led)
				for _, dry := range []bool{true, false} {
					in := ImportInput{Pipeline: "weekly-video", From: from, InPlace: true, DryRun: dry, By: "maria"}
					res, err := Import(ctx, led, set, in)
					if got := conflictList(err); !slices.Equal(got, []string{"over_budget "}) || res.OK {
						t.Fatalf("dry %v: conflicts %v, want over_budget", dry, got)
					}
					if len(res.OverBudget) != 1 || res.OverBudget[0].Imported != 580 || res.OverBudget[0].Period != "2026-W31" {
						t.Fatalf("dry %v: over budget %+v, want 2026-W31 with 580 imported", dry, res.OverBudget)
					}
					flags := []string{"--in-place", "--over-budget 'the old system paid these costs'", "--by 'maria'"}
					if dry {
						flags = []string{"--in-place", "--dry-run", "--over-budget 'the old system paid these costs'", "--by 'maria'"}
					}
					if want := allot.ImportCommand("weekly-video", from, flags...); res.Next != want {
						t.Fatalf("dry %v: next %q, want %q", dry, res.Next, want)
					}
					if !strings.Contains(err.Error(), "budget video-weekly period 2026-W31: limit 5.00 USD, settled 0.00 USD, reserved 0.00 USD, imported 5.80 USD") {
						t.Fatalf("dry %v: the refusal does not name the period: %v", dry, err)
					}
				}
				if diff := dumpDiffLedger(before, dumpLedger(t, led)); diff != "" || weekPeriod(t, led, set).Settled != 0 {
					t.Fatalf("a refused import wrote to the ledger: %s", diff)
				}

				res, err := Import(ctx, led, set, ImportInput{Pipeline: "weekly-video", From: from, InPlace: true, OverBudget: "the old system paid these costs", By: "maria"})
				if err != nil || !res.OK || len(res.OverBudget) != 1 || !res.Imported[0].OverBudget {
					t.Fatalf("import with --over-budget: %+v, %v", res, err)
				}
				metas, err := led.Imports(ctx, "weekly-video")
				if err != nil || len(metas) != 2 || metas[0].OverBudgetBy != "maria" || metas[1].OverBudgetReason != "the old system paid these costs" {
					t.Fatalf("import metadata: %+v, %v; want who and why on both", metas, err)
				}
				if bp := weekPeriod(t, led, set); bp.Settled != 580 {
					t.Fatalf("2026-W31 after the import: %+v", bp)
				}
				check, err := report.Audit(ctx, led, report.CheckInput{Pipelines: set})
				if err != nil || check.OK || len(check.Violations) != 1 || check.Violations[0].Kind != ledger.KindBudgetExceeded {
					t.Fatalf("check after an import over budget: %+v, %v; want budget_exceeded", check.Violations, err)
				}
			})

			t.Run("currency", func(t *testing.T) {
				led, set := ledgertest.Open(t, ledgertest.DriverURL(t, driver)), importBudgetSet(t, 750)
				before := dumpLedger(t, led)
				for _, c := range []struct{ currency, says string }{
					{"EUR", "old.jsonl line 1: cost of \"vt_w31a_v\" is 2.50 EUR, but step video counts against budget video-weekly, which is in USD"},
					{"usd", "old.jsonl line 1: cost of \"vt_w31a_v\": currency \"usd\" is not an ISO 4217 code"},
				} {
					src := ledgertest.WriteSource(t, nil, weekRecord("w31a", "2026-07-27T02:00:00Z", c.currency, true))
					for _, dry := range []bool{true, false} {
						_, err := Import(ctx, led, set, ImportInput{Pipeline: "weekly-video", From: src, InPlace: true, DryRun: dry})
						if got := conflictList(err); !slices.Equal(got, []string{"invalid_record w31a"}) || !strings.Contains(err.Error(), c.says) {
							t.Fatalf("%s, dry %v: %v, want invalid_record saying %q", c.currency, dry, err, c.says)
						}
					}
				}
				if diff := dumpDiffLedger(before, dumpLedger(t, led)); diff != "" {
					t.Fatalf("a refused import wrote to the ledger: %s", diff)
				}
			})
		})
	}
}
