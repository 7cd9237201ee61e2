package workflows

import (
	"strings"
	"testing"

	"allot"
	"allot/activities"
)

// TestStepTableSaysMoneyInMajorUnits: the Web UI's step table prints costs
// as every command does (allot.Money), in the currency's own decimals.
func TestStepTableSaysMoneyInMajorUnits(t *testing.T) {
	table := stepTable([]activities.StepState{
		{Name: "video", Kind: string(allot.KindPaid), RemoteRef: "vt_1", CostAmount: 250, CostCurrency: "USD"},
		{Name: "cover", Kind: string(allot.KindPaid), RemoteRef: "vt_2", CostAmount: 500, CostCurrency: "JPY"},
	})
	for _, want := range []string{"| 2.50 USD |", "| 500 JPY |"} {
		if !strings.Contains(table, want) {
			t.Errorf("step table lacks %q:\n%s", want, table)
		}
	}
}
