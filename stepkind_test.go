package allot

import "testing"

// The step kinds' rules, one row per kind: what every layer asks of a
// kind instead of spelling it.
func TestStepKindRules(t *testing.T) {
	type rules struct{ remote, costs, gate, free bool }
	want := map[StepKind]rules{
		KindLocal:    {free: true},
		KindGo:       {free: true},
		KindExec:     {free: true},
		KindActivity: {free: true},
		KindPaid:     {remote: true, costs: true},
		KindEffect:   {remote: true},
		KindApproval: {gate: true},
	}
	if len(want) != len(StepKinds) {
		t.Fatalf("the table has %d kinds, StepKinds %d", len(want), len(StepKinds))
	}
	for _, k := range StepKinds {
		got := rules{k.Remote(), k.Costs(), k.Gate(), k.Free()}
		if got != want[k] || !k.Valid() {
			t.Errorf("%s: %+v (valid %v), want %+v", k, got, k.Valid(), want[k])
		}
	}
	if StepKind("").Free() || StepKind("").Valid() || StepKind("manual").Valid() {
		t.Error("an empty or unknown kind passes as a known one")
	}
}
