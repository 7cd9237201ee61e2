package report

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
)

// The export's columns are FOCUS 1.2's Mandatory ones, all 21, in the
// specification's order (testdata/focus-1.2-mandatory.txt, read from the
// specification), then allot's own, each prefixed x_.
func TestFOCUSColumnsAreTheSpecificationsMandatoryOnes(t *testing.T) {
	data, err := os.ReadFile("testdata/focus-1.2-mandatory.txt")
	if err != nil {
		t.Fatal(err)
	}
	var spec []string
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			spec = append(spec, line)
		}
	}
	if len(spec) != 21 || !slices.Equal(FOCUSMandatory, spec) {
		t.Fatalf("FOCUSMandatory = %v\nthe specification's %d: %v", FOCUSMandatory, len(spec), spec)
	}
	l := ledgertest.New(t)
	var out bytes.Buffer
	if _, err := ExportFOCUS(context.Background(), l.Led, FOCUSInput{Since: mon, Until: nextMon}, &out); err != nil {
		t.Fatal(err)
	}
	header, err := csv.NewReader(&out).Read()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(header[:21], spec) {
		t.Fatalf("the header starts %v, want the specification's columns", header[:21])
	}
	for _, col := range header[21:] {
		if !strings.HasPrefix(col, "x_") {
			t.Errorf("custom column %q lacks the x_ prefix FOCUS requires", col)
		}
	}
}

// Amounts and currencies round-trip: each row's BilledCost, read back in
// its currency's minor units, is the ledger's cost, for currencies of 0, 2
// and 3 decimals and for the largest amount the ledger books; the row
// names its task, and its times are FOCUS's UTC format.
func TestFOCUSExportRoundTripsAmountsAndCurrencies(t *testing.T) {
	l := ledgertest.New(t)
	ctx := context.Background()
	costs := []allot.Money{{Amount: 1250, Currency: "USD"}, {Amount: 5, Currency: "USD"}, {Amount: 1250, Currency: "JPY"}, {Amount: 1250, Currency: "KWD"}, {Amount: allot.MaxAmount, Currency: "EUR"}}
	want := map[string]allot.Money{}
	for i, m := range costs {
		ep := l.Allocate("weekly", mon.Add(time.Duration(i)*time.Hour))
		ref := ledger.PaidTaskRef{Pipeline: "weekly", EpisodeID: ep.ID, Step: "video"}
		if _, err := l.Led.WriteIntent(ctx, ref, allot.IdempotencyKey("weekly", ep.ID, "video", 0), "w"); err != nil {
			t.Fatal(err)
		}
		remote := "vt_" + strconv.Itoa(i)
		if _, err := l.Led.RecordSubmission(ctx, ledger.Submission{PaidTaskRef: ref, RemoteRef: remote, Amount: m.Amount, Currency: m.Currency}); err != nil {
			t.Fatal(err)
		}
		want[remote] = m
	}
	var out bytes.Buffer
	res, err := ExportFOCUS(ctx, l.Led, FOCUSInput{Since: time.Now().Add(-time.Hour), Until: time.Now().Add(time.Hour)}, &out)
	if err != nil || res.Rows != len(costs) || res.Version != "1.2" {
		t.Fatalf("ExportFOCUS = %+v, %v", res, err)
	}
	rows, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	for _, r := range rows[1:] {
		m, ok := want[r[col["x_VendorTaskId"]]]
		if !ok {
			t.Fatalf("a row of no cost: %v", r)
		}
		if got := minorOf(t, r[col["BilledCost"]], r[col["BillingCurrency"]]); got != m.Amount || r[col["BillingCurrency"]] != m.Currency {
			t.Errorf("%s: BilledCost %q %s reads back as %d, want %d %s", r[col["x_VendorTaskId"]], r[col["BilledCost"]], r[col["BillingCurrency"]], got, m.Amount, m.Currency)
		}
		for _, c := range []string{"ListCost", "ContractedCost", "EffectiveCost"} {
			if r[col[c]] != r[col["BilledCost"]] {
				t.Errorf("%s %q differs from BilledCost %q", c, r[col[c]], r[col["BilledCost"]])
			}
		}
		for _, c := range []string{"BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd"} {
			if _, err := time.Parse("2006-01-02T15:04:05Z", r[col[c]]); err != nil {
				t.Errorf("%s %q is not FOCUS's date/time format: %v", c, r[col[c]], err)
			}
		}
		if r[col["ChargeCategory"]] != "Usage" || r[col["ChargeClass"]] != "" || r[col["x_Pipeline"]] != "weekly" || r[col["x_Step"]] != "video" || r[col["ProviderName"]] != "default" {
			t.Errorf("row %v", r)
		}
	}
	for minor, wantText := range map[int64]string{5: "0.05", 1250: "12.50", 100: "1.00", 0: "0.00", -5: "-0.05"} {
		if got, err := FOCUSDecimal(minor, "USD"); err != nil || got != wantText {
			t.Errorf("FOCUSDecimal(%d, USD) = %q, %v; want %q", minor, got, err, wantText)
		}
	}
	if _, err := FOCUSDecimal(1, "usd"); err == nil {
		t.Error("a currency that is no ISO 4217 code was written")
	}
}

// minorOf reads a FOCUS decimal back into minor units of currency, exactly.
func minorOf(t *testing.T, s, currency string) int64 {
	t.Helper()
	digits := allot.CurrencyDigits(currency)
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) != digits {
		t.Fatalf("%q has %d decimals, %s has %d", s, len(frac), currency, digits)
	}
	n, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
