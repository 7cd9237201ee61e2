package payonce

import (
	"errors"
	"slices"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/internal/ledger"
)

// result stands for the ledger's view of a done task, which the loop only
// carries.
type result struct {
	State     allot.PaidTaskState
	RemoteRef string
}

// scriptedDriver is a Driver whose answers are scripted, and which records
// the calls Drive makes.
type scriptedDriver struct {
	prepares     []Plan[result] // one per attempt
	quotes       []Plan[result] // what preparing again with a quote says
	lookups      []LookupOutcome
	afterLookups []Plan[result]
	sends        []error
	again        bool // Again's answer after a failed send
	calls        []string
}

func (d *scriptedDriver) Prepare(attempt int) (Plan[result], error) {
	d.calls = append(d.calls, "prepare")
	return d.prepares[attempt], nil
}

func (d *scriptedDriver) Quote(Plan[result]) (Plan[result], error) {
	d.calls = append(d.calls, "quote")
	p := d.quotes[0]
	d.quotes = d.quotes[1:]
	return p, nil
}

func (d *scriptedDriver) Lookup(Plan[result]) (LookupOutcome, error) {
	d.calls = append(d.calls, "lookup")
	out := d.lookups[0]
	d.lookups = d.lookups[1:]
	return out, nil
}

func (d *scriptedDriver) AfterLookup(Plan[result], LookupOutcome) (Plan[result], error) {
	d.calls = append(d.calls, "after-lookup")
	p := d.afterLookups[0]
	d.afterLookups = d.afterLookups[1:]
	return p, nil
}

func (d *scriptedDriver) Wait(Plan[result]) error {
	d.calls = append(d.calls, "wait")
	return nil
}

func (d *scriptedDriver) Send(Plan[result]) (result, error) {
	d.calls = append(d.calls, "send")
	err := d.sends[0]
	d.sends = d.sends[1:]
	if err != nil {
		return result{}, err
	}
	return result{State: allot.PaidSubmitted, RemoteRef: "vt_1"}, nil
}

func (d *scriptedDriver) Again(_ int, err error) (bool, error) {
	d.calls = append(d.calls, "again")
	return err != nil && d.again, nil
}

// TestDrivePaidTaskFollowsThePhases: the one protocol loop acts on the
// phases the ledger decides, in order, for every driver.
func TestDrivePaidTaskFollowsThePhases(t *testing.T) {
	done := &result{State: allot.PaidSucceeded, RemoteRef: "vt_0"}
	unanswered := temporal.NewApplicationError("no answer", allot.SendUnanswered)
	for _, tc := range []struct {
		name      string
		d         *scriptedDriver
		wantCalls []string
		wantRef   string
		wantErr   bool
	}{
		{"done at once", &scriptedDriver{prepares: []Plan[result]{{Next: NextDone, Result: done}}},
			[]string{"prepare"}, "vt_0", false},
		{"send", &scriptedDriver{prepares: []Plan[result]{{Next: NextSend}}, sends: []error{nil}},
			[]string{"prepare", "send", "again"}, "vt_1", false},
		{"look up, then adopt", &scriptedDriver{prepares: []Plan[result]{{Next: NextLookup}}, lookups: []LookupOutcome{{NotFound: true}},
			afterLookups: []Plan[result]{{Next: NextDone, Result: done}}},
			[]string{"prepare", "lookup", "after-lookup"}, "vt_0", false},
		{"quote, then send", &scriptedDriver{prepares: []Plan[result]{{Next: NextQuote}}, quotes: []Plan[result]{{Next: NextSend}}, sends: []error{nil}},
			[]string{"prepare", "quote", "send", "again"}, "vt_1", false},
		{"quote, then done (another attempt wrote the intent meanwhile)", &scriptedDriver{prepares: []Plan[result]{{Next: NextQuote}}, quotes: []Plan[result]{{Next: NextDone, Result: done}}},
			[]string{"prepare", "quote"}, "vt_0", false},
		{"a quote asked twice ends the drive", &scriptedDriver{prepares: []Plan[result]{{Next: NextQuote}}, quotes: []Plan[result]{{Next: NextQuote}}},
			[]string{"prepare", "quote"}, "", true},
		{"wait, then the next attempt sends", &scriptedDriver{prepares: []Plan[result]{{Next: NextWait}, {Next: NextSend}}, sends: []error{nil}},
			[]string{"prepare", "wait", "prepare", "send", "again"}, "vt_1", false},
		{"an unanswered send ends a driver that makes no other attempt", &scriptedDriver{prepares: []Plan[result]{{Next: NextSend}}, sends: []error{unanswered}},
			[]string{"prepare", "send", "again"}, "", true},
		{"an unanswered send, then an attempt that asks first", &scriptedDriver{again: true,
			prepares: []Plan[result]{{Next: NextSend}, {Next: NextLookup}}, sends: []error{unanswered},
			lookups: []LookupOutcome{{Found: nil, NotFound: false, Error: "x"}}, afterLookups: []Plan[result]{{Next: NextDone, Result: done}}},
			[]string{"prepare", "send", "again", "prepare", "lookup", "after-lookup"}, "vt_0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Drive(tc.d)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if !slices.Equal(tc.d.calls, tc.wantCalls) {
				t.Errorf("calls = %v, want %v", tc.d.calls, tc.wantCalls)
			}
			if res.RemoteRef != tc.wantRef {
				t.Errorf("result reference = %q, want %q", res.RemoteRef, tc.wantRef)
			}
		})
	}
}

// TestDrivePaidTaskRefusesAnUnknownPhase: a phase the loop does not know (a
// plan from a newer or broken worker) ends the drive with a non-retryable
// InvalidInput on every driver; it was retryable in the activity's copy of
// the loop and non-retryable in the workflow's before there was one loop.
func TestDrivePaidTaskRefusesAnUnknownPhase(t *testing.T) {
	_, err := Drive(&scriptedDriver{prepares: []Plan[result]{{Next: "teleport"}}})
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != allot.InvalidInput || !appErr.NonRetryable() {
		t.Fatalf("unknown phase: %v, want a non-retryable %s", err, allot.InvalidInput)
	}
}

// TestNextPhase is the ledger's decision table of the protocol.
func TestNextPhase(t *testing.T) {
	now := time.Date(2026, 8, 3, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		task ledger.PaidTask
		want Phase
	}{
		{"submitted is done", ledger.PaidTask{State: allot.PaidSubmitted, Owner: "me"}, NextDone},
		{"abandoned is done", ledger.PaidTask{State: allot.PaidAbandoned}, NextDone},
		{"own fresh intent is sent", ledger.PaidTask{State: allot.PaidIntent, Owner: "me"}, NextSend},
		{"another's intent is looked up", ledger.PaidTask{State: allot.PaidIntent, Owner: "other"}, NextLookup},
		{"own intent that may have been sent is looked up", ledger.PaidTask{State: allot.PaidIntent, Owner: "me", MaybeSent: true, SendingUntil: now.Add(-time.Second)}, NextLookup},
		{"a send that may still arrive is waited for", ledger.PaidTask{State: allot.PaidIntent, Owner: "other", MaybeSent: true, SendingUntil: now.Add(time.Second)}, NextWait},
	} {
		if got := NextPhase(tc.task, "me", now); got != tc.want {
			t.Errorf("%s: NextPhase = %s, want %s", tc.name, got, tc.want)
		}
	}
}
