package pipeline

import (
	"fmt"
	"strings"
	"testing"
)

// Money written as a bare number, a string, or with a fractional amount is
// refused with the shape money takes ({ amount = <integer of minor units>,
// currency }) and the value converted, not with the decoder's Go types.
func TestMoneyTypeErrorsSayMinorUnitsAndConvert(t *testing.T) {
	const limit = `limit     = { amount = 75000, currency = "USD" }`
	const maxCost = `max_cost = { amount = 250, currency = "USD" }`
	shape := `money is { amount = <integer of minor units>, currency = "<ISO 4217 code>" }`
	cases := []struct {
		old, new string
		want     []string
	}{
		{maxCost, `max_cost = { amount = 75.5, currency = "USD" }`,
			[]string{"pipeline.step.max_cost.amount", shape, `75.5 USD is max_cost = { amount = 7550, currency = "USD" }`}},
		{limit, `limit     = { amount = 12.5, currency = "JPY" }`,
			[]string{"budget.limit.amount", `"12.5" is not an amount of JPY, which has 0 decimals`}},
		{maxCost, `max_cost = "2.50 EUR"`,
			[]string{"pipeline.step.max_cost", `2.50 EUR is max_cost = { amount = 250, currency = "EUR" }`}},
		{maxCost, `max_cost = 75.5`,
			[]string{"pipeline.step.max_cost", shape, "minor units of its currency", `75.5 USD is max_cost = { amount = 7550, currency = "USD" }`}},
		{`limit    = { amount = 500, currency = "USD" }`, `limit    = 5.5`, // the third budget's: the decoder names the first's line
			[]string{"budget.limit", `5.5 USD is limit = { amount = 550, currency = "USD" }`}},
		{limit, `limit     = 1000 # dollars`,
			[]string{"budget.limit", shape, `1000 USD is limit = { amount = 100000, currency = "USD" }`, `1000 cents is { amount = 1000, currency = "USD" }`}},
	}
	for _, tc := range cases {
		file := strings.Replace(budgetFile, tc.old, tc.new, 1)
		_, err := Parse([]byte(file), "p.toml")
		// The line of the value written, not the key's first in the file.
		at := fmt.Sprintf("p.toml: line %d: ", strings.Count(file[:strings.Index(file, tc.new)], "\n")+1)
		for _, want := range append(tc.want, at) {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v\nwant %q", tc.new, err, want)
			}
		}
		if err != nil && (strings.Contains(err.Error(), "allot.Money") || strings.Contains(err.Error(), "float64")) {
			t.Errorf("%s: %v speaks Go's types", tc.new, err)
		}
	}
	// Other type errors keep the decoder's words.
	_, err := Parse([]byte(strings.Replace(budgetFile, `period    = "iso-week"`, `period    = 7`, 1)), "p.toml")
	if err == nil || strings.Contains(err.Error(), "minor units") {
		t.Errorf("a non-money type error: %v", err)
	}
}
