package vendorapi_test

import (
	"encoding/json"
	"testing"
	"time"

	"allot/paidvendor/vendorapi"
)

// The JSON field names are the contract with every vendor: a rename here
// would break the client against a real vendor while the simulator (which
// shares these types) kept agreeing with it. These goldens catch that.
func TestWireShapes(t *testing.T) {
	at := time.Date(2026, 8, 7, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"submit", vendorapi.SubmitRequest{Kind: "render", Params: map[string]string{"lang": "zh"}},
			`{"kind":"render","params":{"lang":"zh"}}`},
		{"task in progress", vendorapi.Task{ID: "vt_0123456789abcdef", Status: vendorapi.StatusQueued},
			`{"id":"vt_0123456789abcdef","status":"queued"}`},
		{"task succeeded", vendorapi.Task{ID: "vt_0123456789abcdef", IdempotencyKey: "k", Kind: "render", Status: vendorapi.StatusSucceeded,
			SHA256: "ab", Cost: &vendorapi.Cost{Amount: 250, Currency: "USD"}},
			`{"id":"vt_0123456789abcdef","idempotency_key":"k","kind":"render","status":"succeeded","sha256":"ab","cost":{"amount":250,"currency":"USD"}}`},
		{"task failed", vendorapi.Task{ID: "vt_0123456789abcdef", Status: vendorapi.StatusFailed, Error: "overloaded"},
			`{"id":"vt_0123456789abcdef","status":"failed","error":"overloaded"}`},
		{"charge", vendorapi.Charge{ID: "ch_000001", TaskID: "vt_0123456789abcdef", IdempotencyKey: "k", Amount: 250, Currency: "USD", At: at},
			`{"id":"ch_000001","task_id":"vt_0123456789abcdef","idempotency_key":"k","amount":250,"currency":"USD","at":"2026-08-07T09:00:00Z"}`},
		{"refund", vendorapi.Charge{ID: "ch_000002", TaskID: "vt_0123456789abcdef", IdempotencyKey: "k", Amount: 100, Currency: "USD", At: at, Refund: true},
			`{"id":"ch_000002","task_id":"vt_0123456789abcdef","idempotency_key":"k","amount":100,"currency":"USD","at":"2026-08-07T09:00:00Z","refund":true}`},
		{"charges page", vendorapi.ChargesPage{Charges: []vendorapi.Charge{}, NextCursor: "7", HasMore: false},
			`{"charges":[],"next_cursor":"7","has_more":false}`},
		{"bill faults", vendorapi.BillFaults{Faults: []vendorapi.BillFault{{Kind: vendorapi.BillFaultDouble, TaskID: "vt_0123456789abcdef", IdempotencyKey: "k", LineID: "ch_000003"}}},
			`{"faults":[{"kind":"double","task_id":"vt_0123456789abcdef","idempotency_key":"k","line_id":"ch_000003"}]}`},
		{"error", vendorapi.ErrorBody{Error: vendorapi.ErrorDetail{Code: vendorapi.CodeNotFound, Message: "no such task"}},
			`{"error":{"code":"not_found","message":"no such task"}}`},
	} {
		got, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

func TestPaths(t *testing.T) {
	if got := vendorapi.TaskPath("vt_01234567"); got != "/v1/tasks/vt_01234567" {
		t.Errorf("TaskPath = %q", got)
	}
	if got := vendorapi.ResultPath("vt_01234567"); got != "/v1/tasks/vt_01234567/result" {
		t.Errorf("ResultPath = %q", got)
	}
}
