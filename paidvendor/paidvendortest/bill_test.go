package paidvendortest

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"allot"
	"allot/paidvendor"
	"allot/paidvendor/vendorapi"
)

// getPage asks the simulator for one page of its bill with the raw query,
// and returns the status and the page or the error body.
func (tv *testVendor) getPage(t *testing.T, query url.Values) (int, vendorapi.ChargesPage, vendorapi.ErrorBody) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, tv.srv.URL+vendorapi.ChargesPath+"?"+query.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := tv.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var (
		page vendorapi.ChargesPage
		eb   vendorapi.ErrorBody
	)
	var dst any = &page
	if resp.StatusCode != http.StatusOK {
		dst = &eb
	}
	if err := json.NewDecoder(resp.Body).Decode(dst); err != nil {
		t.Fatalf("GET %s?%s: HTTP %d, body does not parse: %v", vendorapi.ChargesPath, query.Encode(), resp.StatusCode, err)
	}
	return resp.StatusCode, page, eb
}

func (tv *testVendor) submitN(t *testing.T, n int) []paidvendor.Task {
	t.Helper()
	var tasks []paidvendor.Task
	for i := range n {
		task, err := tv.client.Submit(context.Background(), submitReq(allot.IdempotencyKey("weekly-video", fmt.Sprintf("2026-W32-%d", i), "render", 0)))
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task)
	}
	return tasks
}

func lineIDs(cs []vendorapi.Charge) []string {
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	return ids
}

func TestChargesPages(t *testing.T) {
	tv := newTestVendor(t, SimConfig{})
	tasks := tv.submitN(t, 7)

	var (
		got   []vendorapi.Charge
		after string
	)
	for i, want := range []struct {
		n    int
		more bool
	}{{3, true}, {3, true}, {1, false}} {
		status, page, eb := tv.getPage(t, url.Values{vendorapi.AfterParam: {after}, vendorapi.LimitParam: {"3"}})
		if status != http.StatusOK || len(page.Charges) != want.n || page.HasMore != want.more {
			t.Fatalf("page %d after %q: HTTP %d %+v, %d lines, has_more %v; want %d lines, has_more %v", i, after, status, eb, len(page.Charges), page.HasMore, want.n, want.more)
		}
		if page.NextCursor == after {
			t.Fatalf("page %d: the cursor stayed at %q", i, after)
		}
		got = append(got, page.Charges...)
		after = page.NextCursor
	}
	if want := []string{"ch_000001", "ch_000002", "ch_000003", "ch_000004", "ch_000005", "ch_000006", "ch_000007"}; !reflect.DeepEqual(lineIDs(got), want) {
		t.Fatalf("line IDs %v, want %v", lineIDs(got), want)
	}
	for i, c := range got {
		if c.TaskID != tasks[i].ID || c.IdempotencyKey != tasks[i].IdempotencyKey || c.Amount != DefaultPrice.Amount || c.Refund {
			t.Fatalf("line %d = %+v, want the charge of task %s", i, c, tasks[i].ID)
		}
	}

	// Nothing new: the page is empty and keeps the reader's place.
	status, page, _ := tv.getPage(t, url.Values{vendorapi.AfterParam: {after}})
	if status != http.StatusOK || len(page.Charges) != 0 || page.NextCursor != after || page.HasMore {
		t.Fatalf("after the last line: HTTP %d %+v, want no lines and next_cursor %q", status, page, after)
	}
	// A new line is read from there, and only it.
	more := tv.submitN(t, 8)[7]
	if _, page, _ := tv.getPage(t, url.Values{vendorapi.AfterParam: {after}}); len(page.Charges) != 1 || page.Charges[0].TaskID != more.ID || page.HasMore {
		t.Fatalf("after a new charge: %+v, want the one line of %s", page, more.ID)
	}
	// No cursor is the start, and no limit the default.
	if _, page, _ := tv.getPage(t, url.Values{}); len(page.Charges) != 8 || page.Charges[0].ID != "ch_000001" {
		t.Fatalf("no cursor: %d lines from %v, want 8 from ch_000001", len(page.Charges), lineIDs(page.Charges))
	}
}

func TestChargesLimitDefaultAndClamp(t *testing.T) {
	tv := newTestVendor(t, SimConfig{})
	for range vendorapi.MaxChargesLimit + 5 {
		tv.sim.PlantPhantomCharge(1, "USD")
	}
	for _, limit := range []string{"", "5000", "1001"} {
		q := url.Values{}
		if limit != "" {
			q.Set(vendorapi.LimitParam, limit)
		}
		status, page, _ := tv.getPage(t, q)
		if status != http.StatusOK || len(page.Charges) != vendorapi.MaxChargesLimit || !page.HasMore {
			t.Fatalf("limit %q: HTTP %d, %d lines, has_more %v; want %d and more", limit, status, len(page.Charges), page.HasMore, vendorapi.MaxChargesLimit)
		}
		_, rest, _ := tv.getPage(t, url.Values{vendorapi.AfterParam: {page.NextCursor}, vendorapi.LimitParam: {limit}})
		if len(rest.Charges) != 5 || rest.HasMore {
			t.Fatalf("limit %q, second page: %d lines, has_more %v; want the last 5", limit, len(rest.Charges), rest.HasMore)
		}
	}
}

func TestChargesBadLimitOrCursorIs400(t *testing.T) {
	tv := newTestVendor(t, SimConfig{})
	tv.submitN(t, 2)
	for _, tc := range []struct {
		query url.Values
		code  string
		says  string
	}{
		{url.Values{vendorapi.LimitParam: {"0"}}, vendorapi.CodeBadLimit, "positive whole number"},
		{url.Values{vendorapi.LimitParam: {"-3"}}, vendorapi.CodeBadLimit, "positive whole number"},
		{url.Values{vendorapi.LimitParam: {"ten"}}, vendorapi.CodeBadLimit, "positive whole number"},
		{url.Values{vendorapi.AfterParam: {"abc"}}, vendorapi.CodeBadCursor, "next_cursor"},
		{url.Values{vendorapi.AfterParam: {"-1"}}, vendorapi.CodeBadCursor, "next_cursor"},
		{url.Values{vendorapi.AfterParam: {"01"}}, vendorapi.CodeBadCursor, "next_cursor"},
		{url.Values{vendorapi.AfterParam: {"3"}}, vendorapi.CodeBadCursor, "not one this vendor gave out"}, // past the last line
	} {
		status, _, eb := tv.getPage(t, tc.query)
		if status != http.StatusBadRequest || eb.Error.Code != tc.code || !strings.Contains(eb.Error.Message, tc.says) {
			t.Errorf("?%s: HTTP %d %+v, want 400 %s saying %q", tc.query.Encode(), status, eb.Error, tc.code, tc.says)
		}
	}
	if status, page, _ := tv.getPage(t, url.Values{vendorapi.AfterParam: {"2"}}); status != http.StatusOK || page.NextCursor != "2" {
		t.Fatalf("the last cursor given out: HTTP %d %+v, want an empty page", status, page)
	}
}

func TestCursorAndLineIDsSurviveRestart(t *testing.T) {
	cfg := SimConfig{StateFile: filepath.Join(t.TempDir(), "vendor.json")}
	first := newTestVendor(t, cfg)
	first.submitN(t, 3)
	_, page, _ := first.getPage(t, url.Values{vendorapi.LimitParam: {"2"}})
	before := first.sim.Charges()
	// The last line is taken off the bill: its number is never given again.
	if err := first.sim.DropCharge(before[2].TaskID); err != nil {
		t.Fatal(err)
	}

	second := newTestVendor(t, cfg)
	if got := second.sim.Charges(); !reflect.DeepEqual(got, before[:2]) {
		t.Fatalf("bill after restart:\n%+v\nwant\n%+v", got, before[:2])
	}
	status, rest, _ := second.getPage(t, url.Values{vendorapi.AfterParam: {page.NextCursor}})
	if status != http.StatusOK || len(rest.Charges) != 0 || rest.NextCursor != page.NextCursor {
		t.Fatalf("the cursor %q after restart: HTTP %d %+v", page.NextCursor, status, rest)
	}
	if status, _, _ := second.getPage(t, url.Values{vendorapi.AfterParam: {"3"}}); status != http.StatusOK {
		t.Fatalf("the dropped line's cursor after restart: HTTP %d", status)
	}
	second.submitN(t, 4)
	_, rest, _ = second.getPage(t, url.Values{vendorapi.AfterParam: {page.NextCursor}})
	if got := lineIDs(rest.Charges); !reflect.DeepEqual(got, []string{"ch_000004"}) {
		t.Fatalf("a charge after restart has line IDs %v, want [ch_000004] (ch_000003 was given out before)", got)
	}
}

func TestOldStateFileGetsLineIDsInOrder(t *testing.T) {
	state := filepath.Join(t.TempDir(), "vendor.json")
	old := `{"version": 1,
  "tasks": [
    {"id": "vt_00000000000000a1", "idempotency_key": "k1", "kind": "render", "params": {}, "cost": {"amount": 250, "currency": "USD"}, "created_at": "2026-08-07T09:00:00Z", "sha256": ""},
    {"id": "vt_00000000000000a2", "idempotency_key": "k2", "kind": "render", "params": {}, "cost": {"amount": 250, "currency": "USD"}, "created_at": "2026-08-07T09:01:00Z", "sha256": ""}
  ],
  "charges": [
    {"task_id": "vt_00000000000000a1", "idempotency_key": "k1", "amount": 250, "currency": "USD", "at": "2026-08-07T09:00:00Z"},
    {"task_id": "vt_00000000000000a2", "idempotency_key": "k2", "amount": 250, "currency": "USD", "at": "2026-08-07T09:01:00Z"}
  ]}`
	if err := os.WriteFile(state, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	tv := newTestVendor(t, SimConfig{StateFile: state})
	got := tv.sim.Charges()
	if len(got) != 2 || got[0].ID != "ch_000001" || got[0].TaskID != "vt_00000000000000a1" || got[1].ID != "ch_000002" || got[1].TaskID != "vt_00000000000000a2" {
		t.Fatalf("charges of a version 1 state file: %+v, want ch_000001 and ch_000002 in order", got)
	}
	if _, page, _ := tv.getPage(t, url.Values{vendorapi.AfterParam: {"1"}}); len(page.Charges) != 1 || page.Charges[0].ID != "ch_000002" {
		t.Fatalf("after cursor 1: %+v", page)
	}
}

// TestPlantedBillFaultsShowOnTheBill plants one of each fault and reads
// the bill and the listing of faults as a reconciler and a checker would.
func TestPlantedBillFaultsShowOnTheBill(t *testing.T) {
	cfg := SimConfig{StateFile: filepath.Join(t.TempDir(), "vendor.json")}
	tv := newTestVendor(t, cfg)
	tasks := tv.submitN(t, 5)
	ok, dropped, wrong, doubled, refunded := tasks[0], tasks[1], tasks[2], tasks[3], tasks[4]

	phantomID := tv.sim.PlantPhantomCharge(777, "USD")
	if err := tv.sim.DropCharge(dropped.ID); err != nil {
		t.Fatal(err)
	}
	if err := tv.sim.SetChargeAmount(wrong.ID, 999); err != nil {
		t.Fatal(err)
	}
	doubleID, err := tv.sim.DoubleCharge(doubled.ID)
	if err != nil {
		t.Fatal(err)
	}
	refundID, err := tv.sim.Refund(refunded.ID, 100)
	if err != nil {
		t.Fatal(err)
	}

	bill, err := tv.client.Charges(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byTask := map[string][]paidvendor.Charge{}
	for _, c := range bill {
		byTask[c.TaskID] = append(byTask[c.TaskID], c)
	}
	price := DefaultPrice.Amount
	check := func(what string, task paidvendor.Task, want ...paidvendor.Charge) {
		t.Helper()
		got := byTask[task.ID]
		if len(got) != len(want) {
			t.Fatalf("%s: the bill has %d lines for task %s, want %d: %+v", what, len(got), task.ID, len(want), got)
		}
		for i, w := range want {
			g := got[i]
			if g.IdempotencyKey != task.IdempotencyKey || g.Amount != w.Amount || g.Refund != w.Refund || g.Currency != "USD" || (w.ID != "" && g.ID != w.ID) {
				t.Fatalf("%s: line %d = %+v, want %+v", what, i, g, w)
			}
		}
	}
	check("a plain task", ok, paidvendor.Charge{Amount: price})
	check("the missing charge", dropped)
	check("the wrong amount", wrong, paidvendor.Charge{Amount: 999})
	check("the double charge", doubled, paidvendor.Charge{Amount: price}, paidvendor.Charge{ID: doubleID, Amount: price})
	check("the refund", refunded, paidvendor.Charge{Amount: price}, paidvendor.Charge{ID: refundID, Amount: 100, Refund: true})
	var phantom []paidvendor.Charge
	for _, c := range bill {
		if c.ID == phantomID {
			phantom = append(phantom, c)
		}
	}
	if len(phantom) != 1 || phantom[0].Amount != 777 || byTask[phantom[0].TaskID][0] != phantom[0] {
		t.Fatalf("the phantom line %s: %+v", phantomID, phantom)
	}
	for _, task := range tasks {
		if task.ID == phantom[0].TaskID || task.IdempotencyKey == phantom[0].IdempotencyKey {
			t.Fatalf("the phantom line %+v names a real task %s", phantom[0], task.ID)
		}
	}
	if _, err := tv.client.Task(context.Background(), phantom[0].TaskID); err == nil {
		t.Fatalf("the phantom's task %s exists", phantom[0].TaskID)
	}
	if got, err := tv.client.Task(context.Background(), dropped.ID); err != nil || got.Status != paidvendor.StatusSucceeded || got.Cost.Amount != price {
		t.Fatalf("the task whose charge was dropped: %+v, %v; want it succeeded with its cost", got, err)
	}

	want := []vendorapi.BillFault{
		{Kind: vendorapi.BillFaultPhantom, TaskID: phantom[0].TaskID, IdempotencyKey: phantom[0].IdempotencyKey, LineID: phantomID},
		{Kind: vendorapi.BillFaultMissing, TaskID: dropped.ID, IdempotencyKey: dropped.IdempotencyKey, LineID: "ch_000002"},
		{Kind: vendorapi.BillFaultWrongAmount, TaskID: wrong.ID, IdempotencyKey: wrong.IdempotencyKey, LineID: "ch_000003"},
		{Kind: vendorapi.BillFaultDouble, TaskID: doubled.ID, IdempotencyKey: doubled.IdempotencyKey, LineID: doubleID},
		{Kind: vendorapi.BillFaultRefund, TaskID: refunded.ID, IdempotencyKey: refunded.IdempotencyKey, LineID: refundID},
	}
	listed, err := tv.client.BillFaults(context.Background())
	if err != nil || !reflect.DeepEqual(listed, want) {
		t.Fatalf("GET %s: %+v, %v\nwant %+v", vendorapi.BillFaultsPath, listed, err, want)
	}

	// The faults and the bill outlive a restart.
	again := newTestVendor(t, cfg)
	if got := again.sim.BillFaults(); !reflect.DeepEqual(got, want) {
		t.Fatalf("bill faults after restart: %+v", got)
	}
	if got := again.sim.Charges(); !reflect.DeepEqual(got, tv.sim.Charges()) {
		t.Fatalf("bill after restart:\n%+v\nwant\n%+v", got, tv.sim.Charges())
	}
}

func TestPlantingABillFaultNeedsATaskWithACharge(t *testing.T) {
	tv := newTestVendor(t, SimConfig{})
	task := tv.submitN(t, 1)[0]
	if err := tv.sim.DropCharge("vt_0000000000000bad"); err == nil || !strings.Contains(err.Error(), "no task") {
		t.Errorf("DropCharge of an unknown task: %v", err)
	}
	if err := tv.sim.SetChargeAmount(task.ID, task.Cost.Amount); err == nil {
		t.Error("SetChargeAmount to the task's own cost planted a fault that is none")
	}
	if _, err := tv.sim.Refund(task.ID, 0); err == nil {
		t.Error("Refund of 0 accepted")
	}
	if err := tv.sim.DropCharge(task.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tv.sim.DoubleCharge(task.ID); err == nil || !strings.Contains(err.Error(), "no charge line") {
		t.Errorf("DoubleCharge of a task whose charge was dropped: %v", err)
	}
	if got := tv.sim.BillFaults(); len(got) != 1 || got[0].Kind != vendorapi.BillFaultMissing {
		t.Errorf("refused plantings were listed: %+v", got)
	}
}

// billFaultsOf runs 60 submissions with every bill fault on, and returns
// the kinds planted, per accepted task, and the simulator.
func billFaultsOf(t *testing.T, seed int64) ([]string, *testVendor) {
	t.Helper()
	tv := newTestVendor(t, SimConfig{Seed: seed, BillDropCharge: 0.1, BillWrongAmount: 0.1, BillDoubleCharge: 0.1, BillRefund: 0.1, BillPhantomEvery: 20})
	tasks := tv.submitN(t, 60)
	kinds := make([]string, len(tasks))
	index := map[string]int{}
	for i, task := range tasks {
		index[task.ID] = i
	}
	for _, f := range tv.sim.BillFaults() {
		if f.Kind != vendorapi.BillFaultPhantom {
			kinds[index[f.TaskID]] += f.Kind
		}
	}
	return kinds, tv
}

func TestBillFaultSettingsPlantWhatTheyList(t *testing.T) {
	kinds, tv := billFaultsOf(t, 5)
	again, _ := billFaultsOf(t, 5)
	if !reflect.DeepEqual(kinds, again) {
		t.Fatalf("the same seed planted different faults:\n%q\n%q", kinds, again)
	}
	other, _ := billFaultsOf(t, 6)
	if reflect.DeepEqual(kinds, other) {
		t.Fatal("seeds 5 and 6 planted the same faults: the seed is not used")
	}

	// Every planted fault shows on the bill as the listing says, and
	// nothing else differs from one line per task at its cost.
	count := map[string]int{}
	faultOf := map[string]vendorapi.BillFault{}
	for _, f := range tv.sim.BillFaults() {
		count[f.Kind]++
		faultOf[f.TaskID] = f
	}
	if count[vendorapi.BillFaultPhantom] != 3 {
		t.Errorf("%d phantoms for 60 tasks, one per 20: want 3", count[vendorapi.BillFaultPhantom])
	}
	for _, k := range []string{vendorapi.BillFaultMissing, vendorapi.BillFaultWrongAmount, vendorapi.BillFaultDouble, vendorapi.BillFaultRefund} {
		if count[k] == 0 {
			t.Errorf("no %s planted in 60 tasks at P=0.1: %v", k, count)
		}
	}
	lines := map[string][]paidvendor.Charge{}
	for _, c := range tv.sim.Charges() {
		lines[c.TaskID] = append(lines[c.TaskID], c)
	}
	for taskID, ls := range lines {
		f, planted := faultOf[taskID]
		kinds := ""
		for _, l := range ls {
			switch {
			case l.Refund:
				kinds += "refund "
			case l.Amount != DefaultPrice.Amount:
				kinds += "wrong "
			default:
				kinds += "charge "
			}
		}
		want := map[string]string{
			"":                             "charge ",
			vendorapi.BillFaultPhantom:     "charge ",
			vendorapi.BillFaultWrongAmount: "wrong ",
			vendorapi.BillFaultDouble:      "charge charge ",
			vendorapi.BillFaultRefund:      "charge refund ",
		}[f.Kind]
		if kinds != want || planted && ls[len(ls)-1].ID != f.LineID {
			t.Errorf("task %s (fault %+v) is billed %q, want %q ending in the listed line", taskID, f, kinds, want)
		}
	}
	for taskID, f := range faultOf {
		if f.Kind == vendorapi.BillFaultMissing && len(lines[taskID]) != 0 {
			t.Errorf("the missing charge of %s is on the bill: %+v", taskID, lines[taskID])
		}
	}
}

// TestBillFaultsLeaveTheOtherFaultsAlone: turning bill faults on does not
// move the sequence of lost responses and failures a seed gives.
func TestBillFaultsLeaveTheOtherFaultsAlone(t *testing.T) {
	outcomes := func(cfg SimConfig) []outcome {
		tv := newTestVendor(t, cfg)
		var seq []outcome
		for i := range 30 {
			_, err := tv.client.Submit(context.Background(), submitReq(allot.IdempotencyKey("p", fmt.Sprint(i), "s", 0)))
			seq = append(seq, classifyOutcome(t, err))
		}
		return seq
	}
	plain := outcomes(SimConfig{Seed: 9, FailBeforeAccept: 0.3, LoseResponseAfterAccept: 0.3})
	billed := outcomes(SimConfig{Seed: 9, FailBeforeAccept: 0.3, LoseResponseAfterAccept: 0.3, BillDoubleCharge: 0.5, BillRefund: 0.5})
	if !reflect.DeepEqual(plain, billed) {
		t.Fatalf("bill faults changed the other faults:\n%v\n%v", plain, billed)
	}
}

func TestBillFaultSettingsValidation(t *testing.T) {
	for name, cfg := range map[string]SimConfig{
		"drop > 1":            {APIKey: "k", BillDropCharge: 1.5},
		"refund < 0":          {APIKey: "k", BillRefund: -0.1},
		"sum > 1":             {APIKey: "k", BillDoubleCharge: 0.6, BillWrongAmount: 0.6},
		"phantom every < 0":   {APIKey: "k", BillPhantomEvery: -1},
		"wrong amount is NaN": {APIKey: "k", BillWrongAmount: math.NaN()},
	} {
		if _, err := OpenSimulator(cfg); err == nil {
			t.Errorf("%s: OpenSimulator accepted %+v", name, cfg)
		}
	}
}
