package chaos

import (
	"slices"
	"strings"
	"testing"

	"allot"
	"allot/internal/ledger"
	"allot/paidvendor"
	"allot/paidvendor/vendorapi"
)

// A bill of five tasks with one fault of each kind planted, as vendorsim
// plants them: t1 billed twice (ch_2 the second), t2 refunded (ch_4), t3
// billed 2× (ch_5), t4's charge dropped (ch_6 never on the bill), a
// phantom line ch_7; t5 billed right.
func plantedFixture() (plantedBill, []paidvendor.Charge) {
	faults := []vendorapi.BillFault{
		{Kind: vendorapi.BillFaultDouble, TaskID: "t1", IdempotencyKey: "k1", LineID: "ch_2"},
		{Kind: vendorapi.BillFaultRefund, TaskID: "t2", IdempotencyKey: "k2", LineID: "ch_4"},
		{Kind: vendorapi.BillFaultWrongAmount, TaskID: "t3", IdempotencyKey: "k3", LineID: "ch_5"},
		{Kind: vendorapi.BillFaultMissing, TaskID: "t4", IdempotencyKey: "k4", LineID: "ch_6"},
		{Kind: vendorapi.BillFaultPhantom, TaskID: "tx", IdempotencyKey: "kx", LineID: "ch_7"},
	}
	charge := func(id, task, key string, amount int64, refund bool) paidvendor.Charge {
		return paidvendor.Charge{ID: id, TaskID: task, IdempotencyKey: key, Amount: amount, Currency: "USD", Refund: refund}
	}
	bill := []paidvendor.Charge{
		charge("ch_1", "t1", "k1", 100, false), charge("ch_2", "t1", "k1", 100, false),
		charge("ch_3", "t2", "k2", 200, false), charge("ch_4", "t2", "k2", 200, true),
		charge("ch_5", "t3", "k3", 600, false),
		charge("ch_7", "tx", "kx", 300, false),
		charge("ch_8", "t5", "k5", 400, false),
	}
	return newPlantedBill(faults), bill
}

// The ledger's costs of the fixture: every task's, t4's too (its charge
// was dropped, its cost stands).
func fixtureCost(ref string) (allot.Money, bool) {
	amounts := map[string]int64{"t1": 100, "t2": 200, "t3": 300, "t4": 500, "t5": 400}
	a, ok := amounts[ref]
	return allot.Money{Amount: a, Currency: "USD"}, ok
}

// TestFairBillLeavesOutExactlyThePlantedLines: allot's own promises (one
// charge per key, the bill equals the costs) are checked on the bill
// without the planted lines, the wrongly billed one at its true price;
// every other line stays as billed.
func TestFairBillLeavesOutExactlyThePlantedLines(t *testing.T) {
	p, bill := plantedFixture()
	fair := p.fair(bill, fixtureCost)
	var got []string
	var total int64
	for _, ch := range fair {
		got = append(got, ch.ID)
		total += ch.Amount
	}
	if want := []string{"ch_1", "ch_3", "ch_5", "ch_8"}; !slices.Equal(got, want) {
		t.Fatalf("fair bill has lines %v, want %v", got, want)
	}
	if fair[2].Amount != 300 {
		t.Errorf("the wrongly billed line counts %d, want the ledger's cost 300", fair[2].Amount)
	}
	// The costs (1500) are the fair bill and the dropped charge's cost.
	if cost, _ := fixtureCost("t4"); total+cost.Amount != 1500 || !p.dropped["t4"] {
		t.Errorf("fair bill totals %d, dropped %v: want 1000 and t4", total, p.dropped)
	}
	// A line planted nowhere, though it charges a key twice, stays: a
	// double charge allot did not plant is a broken promise.
	extra := append(slices.Clone(bill), paidvendor.Charge{ID: "ch_9", TaskID: "t5", IdempotencyKey: "k5", Amount: 400, Currency: "USD"})
	if n := len(p.fair(extra, fixtureCost)); n != 5 {
		t.Errorf("an unplanted second charge was left out: %d lines, want 5", n)
	}
}

// TestDriftMustBeExactlyThePlantedFaults: each planted fault expects its
// class on its line (a dropped charge on its cost's line), and the
// comparison reports a missing item and an item nobody planted.
func TestDriftMustBeExactlyThePlantedFaults(t *testing.T) {
	p, _ := plantedFixture()
	hasCost := func(ref string) bool { _, ok := fixtureCost(ref); return ok }
	expected := expectedDrift("acct", p, hasCost)
	item := func(line string, class allot.DriftClass) ledger.DriftItem {
		return ledger.DriftItem{Account: "acct", Vendor: "default", Line: line, Class: class}
	}
	exact := []ledger.DriftItem{
		item("ch_2", allot.DriftDoubleCharge), item("ch_4", allot.DriftRefunded), item("ch_5", allot.DriftAmountDiffers),
		item(allot.DriftLineOfCost("t4"), allot.DriftUncharged), item("ch_7", allot.DriftUnrecorded),
	}
	if missing, unplanted := compareDrift(expected, exact); len(missing)+len(unplanted) != 0 {
		t.Fatalf("exact drift judged wrong: missing %v, unplanted %v", missing, unplanted)
	}
	// One item short: its fault is named.
	if missing, _ := compareDrift(expected, exact[1:]); len(missing) != 1 || !strings.Contains(missing[0], "double") {
		t.Errorf("a missing double charge item: got %v", missing)
	}
	// An item on a line nobody planted, the right class on the wrong
	// line, another class on a planted line, another account's item: all
	// unplanted.
	for _, extra := range []ledger.DriftItem{
		item("ch_8", allot.DriftUnrecorded), item("ch_6", allot.DriftUncharged), item("ch_5", allot.DriftUnrecorded),
		{Account: "strict", Vendor: "strict", Line: "ch_2", Class: allot.DriftDoubleCharge},
	} {
		if _, unplanted := compareDrift(expected, append(slices.Clone(exact), extra)); len(unplanted) != 1 {
			t.Errorf("drift item %+v was not reported as unplanted: %v", extra, unplanted)
		}
	}
	// The same item twice is one too many.
	if _, unplanted := compareDrift(expected, append(slices.Clone(exact), exact[0])); len(unplanted) != 1 {
		t.Errorf("a duplicated drift item was not reported: %v", unplanted)
	}
}

// TestDriftOfATaskWithoutACost: a fault planted on a task whose cost the
// ledger never recorded is judged from what the ledger holds: its wrongly
// billed line is money spent without a record, and its dropped charge
// leaves nothing uncharged.
func TestDriftOfATaskWithoutACost(t *testing.T) {
	p, _ := plantedFixture()
	expected := expectedDrift("acct", p, func(ref string) bool { return ref != "t3" && ref != "t4" })
	if _, ok := expected[driftKey{"acct", "ch_5", allot.DriftUnrecorded}]; !ok {
		t.Errorf("a wrong amount on a task without a cost expects %v", expected)
	}
	for k := range expected {
		if k.class == allot.DriftUncharged {
			t.Errorf("a dropped charge of a task without a cost expects %s", k)
		}
	}
	if len(expected) != 4 {
		t.Errorf("expected %d items, want 4: %v", len(expected), expected)
	}
}

// TestDefaultVendorPlantsBillFaults: the bill faults reach vendorsim's
// command line, on every start (not only with the connection faults); a
// vendor without them gets none.
func TestDefaultVendorPlantsBillFaults(t *testing.T) {
	v := &vendorProc{faults: vendorFaults{Bill: billFaults{Drop: 0.03, Wrong: 0.03, Double: 0.03, Refund: 0.03, PhantomEvery: 40}}}
	for _, faults := range []bool{true, false} {
		args := strings.Join(v.args(faults), " ")
		for _, want := range []string{"--bill-drop-charge 0.03", "--bill-wrong-amount 0.03", "--bill-double-charge 0.03", "--bill-refund 0.03", "--bill-phantom-every 40"} {
			if !strings.Contains(args, want) {
				t.Errorf("vendorsim %s lacks %s", args, want)
			}
		}
	}
	clean := &vendorProc{}
	if args := strings.Join(clean.args(true), " "); strings.Contains(args, "--bill-") {
		t.Errorf("a clean vendor plants bill faults: %s", args)
	}
}
