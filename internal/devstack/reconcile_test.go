package devstack_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/allottest"
	"allot/internal/devstack"
	"allot/internal/ledger"
	"allot/internal/pipelinetest"
)

// Issue 28 §2 and issue 27 §5: a running worker reconciles its vendor's
// bill by itself (a phantom charge becomes a drift item in the ledger
// without anyone asking), and its /metrics serves every metric the alert
// rules in deploy/prometheus use, the drift among them.
func TestTheWorkerReconcilesTheBillAndServesEveryAlertedMetric(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the embedded server")
	}
	dir := t.TempDir()
	dev := allottest.StartDevWith(t, devstack.Config{
		DataDir: filepath.Join(dir, "data"), Pipelines: pipelinetest.Write(t, dir, waitingDemo),
		DemoInterval: 2 * time.Second, AutoApprove: true, MetricsAddr: "127.0.0.1:0",
		ReconcileEvery: 500 * time.Millisecond, VendorBillPhantomEvery: 1,
	})
	led, err := ledger.OpenReadOnly(context.Background(), dev.Info.Ledger)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()

	deadline := allottest.Deadline(t, 90*time.Second)
	for {
		items, err := led.DriftItems(context.Background(), ledger.DriftFilter{Class: allot.DriftUnrecorded})
		if err != nil {
			t.Fatal(err)
		}
		if len(items) > 0 {
			if items[0].EpisodeID != "" || items[0].Vendor != "default" || items[0].Amount <= 0 {
				t.Fatalf("the phantom charge's item: %+v", items[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no drift item for the phantom charges in time: the worker does not reconcile the bill by itself")
		}
		time.Sleep(250 * time.Millisecond)
	}

	rules, err := os.ReadFile("../../deploy/prometheus/allot-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	// allot's own metrics, and the SDK's a rule reads (temporal_num_pollers).
	names := regexp.MustCompile(`(allot|temporal)_[a-z_]+`).FindAllString(string(rules), -1)
	slices.Sort(names)
	names = slices.Compact(names)
	var body string
	for {
		resp, err := http.Get(dev.Info.Metrics)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		var missing []string
		for _, n := range names {
			if !strings.Contains(body, "\n"+n+"{") {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 && strings.Contains(body, `allot_vendor_bill_reconciled{vendor="default"} 1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker's /metrics lacks %v of the alert rules' metrics, or does not say the default vendor is reconciled:\n%s", missing, body)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if !regexp.MustCompile(`allot_vendor_drift_items\{class="charged_unrecorded",vendor="default"\} [1-9]`).MatchString(body) {
		t.Fatalf("the drift items are not in the metrics:\n%s", body)
	}
}
