package report

// The ledger's costs in FOCUS, the FinOps Foundation's open cost and usage
// format (docs/operating.md, "Costs in FOCUS"), so that the tools finance
// reads take allot's spend beside the clouds'. Facts of the format are
// FOCUS 1.2's (github.com/FinOps-Open-Cost-and-Usage-Spec/FOCUS_Spec, tag
// v1.2): the columns whose feature level is Mandatory, in the
// specification's alphabetical order; custom columns after them, prefixed
// x_ (attribute ColumnHandling); amounts in NumericFormat (a plain decimal,
// no grouping, no currency); date/times in UTC as YYYY-MM-DDTHH:mm:ssZ
// (DateTimeFormat); null as an empty field (NullHandling).

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/reconcile"
)

// FOCUSVersion is the FOCUS specification version the export follows.
const FOCUSVersion = "1.2"

// FOCUSMandatory are FOCUS 1.2's Mandatory columns, in its order.
var FOCUSMandatory = []string{
	"BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodEnd", "BillingPeriodStart",
	"ChargeCategory", "ChargeClass", "ChargeDescription", "ChargePeriodEnd", "ChargePeriodStart", "ContractedCost",
	"EffectiveCost", "InvoiceIssuerName", "ListCost", "PricingQuantity", "PricingUnit", "ProviderName", "PublisherName",
	"ServiceCategory", "ServiceName",
}

// FOCUSCustom are allot's own columns, after FOCUS's: where each charge
// comes from and the budgets that hold it (space-separated).
var FOCUSCustom = []string{"x_Pipeline", "x_EpisodeId", "x_Step", "x_Revision", "x_VendorTaskId", "x_Budgets"}

// FOCUSInput is the window of costs to export: those recorded in [Since,
// Until), of Pipeline ("" every one).
type FOCUSInput struct {
	Pipeline string
	Since    time.Time
	Until    time.Time
}

// FOCUSResult says what was written.
type FOCUSResult struct {
	Version string `json:"version"`
	Rows    int    `json:"rows"`
}

// ExportFOCUS writes the window's costs to w as FOCUS CSV, one row per
// charge, and says how many. What allot knows is a charge per vendor task:
//   - BilledCost is the ledger's cost, exact in the currency's minor
//     units; ListCost, ContractedCost and EffectiveCost equal it (allot
//     records no list price, contract or commitment discount yet);
//   - ChargeCategory Usage, PricingQuantity 1 of PricingUnit Requests (a
//     task is one request), ChargeClass null;
//   - the charge period is the UTC day the cost was recorded, the billing
//     period its UTC calendar month;
//   - ProviderName, PublisherName, InvoiceIssuerName, ServiceName and
//     BillingAccountName are the vendor's name in the pipeline file;
//     BillingAccountId is the account its bill reports (the ledger keeps
//     it from reconciliation), else that name; ServiceCategory Other.
func ExportFOCUS(ctx context.Context, led *ledger.Ledger, in FOCUSInput, w io.Writer) (FOCUSResult, error) {
	lines, err := led.CostLines(ctx, in.Pipeline, in.Since, in.Until)
	if err != nil {
		return FOCUSResult{}, err
	}
	accounts := map[string]string{}
	for _, c := range lines {
		if _, ok := accounts[c.Vendor]; ok {
			continue
		}
		wm, err := led.BillWatermark(ctx, reconcile.Account(c.Vendor))
		if err != nil {
			return FOCUSResult{}, err
		}
		accounts[c.Vendor] = c.Vendor
		if wm.VendorAccount != "" {
			accounts[c.Vendor] = wm.VendorAccount
		}
	}
	columns := append(slices.Clone(FOCUSMandatory), FOCUSCustom...)
	cw := csv.NewWriter(w)
	if err := cw.Write(columns); err != nil {
		return FOCUSResult{}, err
	}
	for _, c := range lines {
		cost, err := FOCUSDecimal(c.Amount, c.Currency)
		if err != nil {
			return FOCUSResult{}, fmt.Errorf("cost of vendor task %s: %w", c.RemoteRef, err)
		}
		at := c.RecordedAt.UTC()
		day := time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, time.UTC)
		month := time.Date(at.Year(), at.Month(), 1, 0, 0, 0, 0, time.UTC)
		row := map[string]string{
			"BilledCost":         cost,
			"BillingAccountId":   accounts[c.Vendor],
			"BillingAccountName": c.Vendor,
			"BillingCurrency":    c.Currency,
			"BillingPeriodEnd":   focusTime(month.AddDate(0, 1, 0)),
			"BillingPeriodStart": focusTime(month),
			"ChargeCategory":     "Usage",
			"ChargeClass":        "",
			"ChargeDescription":  fmt.Sprintf("pipeline %s episode %s step %s revision %d, vendor task %s", c.Pipeline, c.EpisodeID, c.Step, c.Revision, c.RemoteRef),
			"ChargePeriodEnd":    focusTime(day.AddDate(0, 0, 1)),
			"ChargePeriodStart":  focusTime(day),
			"ContractedCost":     cost,
			"EffectiveCost":      cost,
			"InvoiceIssuerName":  c.Vendor,
			"ListCost":           cost,
			"PricingQuantity":    "1",
			"PricingUnit":        "Requests",
			"ProviderName":       c.Vendor,
			"PublisherName":      c.Vendor,
			"ServiceCategory":    "Other",
			"ServiceName":        c.Vendor,
			"x_Pipeline":         c.Pipeline,
			"x_EpisodeId":        c.EpisodeID,
			"x_Step":             c.Step,
			"x_Revision":         strconv.Itoa(c.Revision),
			"x_VendorTaskId":     c.RemoteRef,
			"x_Budgets":          strings.Join(c.Budgets, " "),
		}
		rec := make([]string, 0, len(columns))
		for _, col := range columns {
			rec = append(rec, row[col])
		}
		if err := cw.Write(rec); err != nil {
			return FOCUSResult{}, err
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return FOCUSResult{}, err
	}
	return FOCUSResult{Version: FOCUSVersion, Rows: len(lines)}, nil
}

// FOCUSDecimal is minor units of currency as FOCUS's NumericFormat writes
// an amount: a plain decimal in major units with the currency's digits
// (1250 USD: "12.50"; 1250 JPY: "1250"), exact, never a float
// (allot.Money.Decimal).
func FOCUSDecimal(minor int64, currency string) (string, error) {
	if err := allot.CheckCurrency(currency); err != nil {
		return "", err
	}
	return allot.Money{Amount: minor, Currency: currency}.Decimal(), nil
}

// focusTime is t as FOCUS's DateTimeFormat writes it.
func focusTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }
