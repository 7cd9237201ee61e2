package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"allot/internal/ledger"
	"allot/paidvendor/vendorapi"
)

// billingVendor serves a charge list, in one page, to requests with its
// key (each line gets an ID when it has none); any other request is
// counted as a stray.
func billingVendor(t *testing.T, key string, charges []vendorapi.Charge) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var strays atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != vendorapi.ChargesPath || r.Header.Get("Authorization") != "Bearer "+key {
			strays.Add(1)
			http.Error(w, "unexpected", http.StatusTeapot)
			return
		}
		after := r.URL.Query().Get(vendorapi.AfterParam)
		page := vendorapi.ChargesPage{Charges: []vendorapi.Charge{}, NextCursor: after}
		if after == "" && len(charges) > 0 {
			page.NextCursor = strconv.Itoa(len(charges))
			for i, c := range charges {
				if c.ID == "" {
					c.ID = fmt.Sprintf("%s%06d", vendorapi.ChargeIDPrefix, i+1)
				}
				page.Charges = append(page.Charges, c)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(page)
	}))
	t.Cleanup(srv.Close)
	return srv, &strays
}

// TestCheckIsReadOnlyAndReportsWithExit3 runs check, with --vendor, on a
// ledger with problems: it reports each with its kind, subject, detail and
// fix, exits 3, and every row of every table and every artifact file are as
// they were (TestReadOnlyCommandsNeverWriteTheLedger checks the SQLite files).
func TestCheckIsReadOnlyAndReportsWithExit3(t *testing.T) {
	for _, l := range testLedgers(t) {
		t.Run(l.driver, func(t *testing.T) {
			ctx := context.Background()
			data := t.TempDir()
			// The default vendor bills one task the ledger does not know;
			// the studio (covers) bills exactly what the ledger books.
			defaultVendor, defaultStrays := billingVendor(t, "default-key", []vendorapi.Charge{
				{TaskID: "vt_29a0c1d2e3f40001", Amount: 250, Currency: "USD", At: time.Now()},
				{TaskID: "vt_30a0c1d2e3f40001", Amount: 250, Currency: "USD", At: time.Now()},
				{TaskID: "vt_30a0c1d2e3f40011", Amount: 250, Currency: "USD", At: time.Now()},
				{TaskID: "vt_31a0c1d2e3f40001", Amount: 250, Currency: "USD", At: time.Now()},
				{TaskID: "vt_deadbeef00000001", Amount: 250, Currency: "USD", At: time.Now()},
			})
			studio, studioStrays := billingVendor(t, "studio-key", []vendorapi.Charge{
				{TaskID: "vt_29c0c1d2e3f40002", Amount: 40, Currency: "USD", At: time.Now()},
				{TaskID: "vt_30c0c1d2e3f40002", Amount: 40, Currency: "USD", At: time.Now()},
				{TaskID: "vt_31c0c1d2e3f40002", Amount: 40, Currency: "USD", At: time.Now()},
			})
			t.Setenv("ALLOT_VENDOR_URL", defaultVendor.URL)
			t.Setenv("ALLOT_VENDOR_API_KEY", "default-key")
			t.Setenv("STUDIO_API_KEY", "studio-key")
			pipes := writePipelines(t, studio.URL)
			if code, out, errOut := run(t, "import", "--pipeline", "weekly-video", "--from", exampleJSONL, "--ledger", l.url, "--pipelines", pipes, "--data-dir", data); code != exitOK {
				t.Fatalf("import: exit %d, %s %s", code, out, errOut)
			}
			// A file damaged, and an intent left without its reference.
			if err := os.WriteFile(filepath.Join(data, "artifacts", "weekly-video", "2026-W29-0", "cover-r0.png"), []byte("edited\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			led, err := ledger.Open(ctx, l.url)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := led.Decide(ctx, ledger.DecisionRequest{OperatorDecision: ledger.OperatorDecision{
				RequestID: "rework-1", Pipeline: "weekly-video", EpisodeID: "2026-W31-0", Step: "video", Action: "rework"}}); err != nil {
				t.Fatal(err)
			}
			// As the Episode workflow does when a rework starts it again.
			if err := led.RecordEpisodeOutcome(ctx, "weekly-video", "2026-W31-0", "running", "", time.Time{}); err != nil {
				t.Fatal(err)
			}
			if _, err := led.WriteIntent(ctx, ledger.PaidTaskRef{Pipeline: "weekly-video", EpisodeID: "2026-W31-0", Step: "video", Revision: 1}, "key-r1", "attempt"); err != nil {
				t.Fatal(err)
			}
			led.Close()

			rows, files := l.dump(t), filesUnder(t, data)
			if code, out, _ := run(t, "check", "--ledger", l.url, "--pipelines", pipes); code != exitViolations || !strings.Contains(out, "artifact_mismatch") {
				t.Fatalf("check: exit %d, %s", code, out)
			}
			code, stdout, stderr := run(t, "check", "--vendor", "--json", "--stale-intent", "1ns", "--ledger", l.url, "--pipelines", pipes)
			var res struct {
				OK         bool `json:"ok"`
				Violations []struct {
					Kind, Pipeline, Episode, Detail, Fix string
				} `json:"violations"`
				Vendors []struct {
					Name    string `json:"name"`
					Charges int    `json:"charges"`
				} `json:"vendors"`
			}
			if err := json.Unmarshal([]byte(stdout), &res); err != nil {
				t.Fatalf("check --json printed %q (%s): %v", stdout, stderr, err)
			}
			var got []string
			for _, v := range res.Violations {
				got = append(got, v.Kind+" "+v.Episode+" "+v.Fix)
				if v.Detail == "" {
					t.Errorf("violation %+v has no detail", v)
				}
			}
			slices.Sort(got)
			want := []string{
				"artifact_mismatch 2026-W29-0 ",
				"charge_unrecorded  ",
				"unknown_outcome 2026-W31-0 starter episode lookup --pipeline weekly-video --episode 2026-W31-0 --step video",
			}
			if code != exitViolations || res.OK || !slices.Equal(got, want) || len(res.Vendors) != 2 || res.Vendors[0].Charges != 5 {
				t.Fatalf("check: exit %d, violations\n  %s\nwant\n  %s\n%s", code, strings.Join(got, "\n  "), strings.Join(want, "\n  "), stdout)
			}

			if diff := dumpDiff(rows, l.dump(t)); diff != "" {
				t.Fatalf("check wrote to the ledger: %s", diff)
			}
			if after := filesUnder(t, data); !maps.Equal(files, after) {
				t.Fatalf("check changed the files:\n%v\n%v", files, after)
			}
			if n := defaultStrays.Load() + studioStrays.Load(); n != 0 {
				t.Fatalf("check sent the vendors %d requests other than listing charges", n)
			}
		})
	}
}

// TestCheckRefusesABadThreshold: --stale-intent must be a positive
// duration; a usage error before anything is opened.
func TestCheckRefusesABadThreshold(t *testing.T) {
	for _, v := range []string{"0s", "-1h", "soon"} {
		if code, _, stderr := run(t, "check", "--stale-intent", v, "--ledger", "sqlite:"+filepath.Join(t.TempDir(), "none.db")); code != exitUsage {
			t.Errorf("--stale-intent %s: exit %d, %s; want a usage error", v, code, stderr)
		}
	}
}
