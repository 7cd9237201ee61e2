package allot

// StepKind says who runs a step and whether it costs money. Its rules are
// methods here, so that every layer asks the kind instead of spelling them.
type StepKind string

const (
	// KindLocal steps are allot's built-in steps (plan, assemble,
	// publish): free, run on the worker.
	KindLocal StepKind = "local"
	// KindGo steps are functions registered in a custom worker
	// (app.RunWorker with Steps): free, run on the worker.
	KindGo StepKind = "go"
	// KindExec steps run a command in the episode's directory.
	KindExec StepKind = "exec"
	// KindActivity steps call an activity of a worker in any language, on
	// its own task queue.
	KindActivity StepKind = "activity"
	// KindPaid steps submit work to a vendor, at most once, and download
	// its result.
	KindPaid StepKind = "paid"
	// KindEffect steps act on another system once (publish, notify), under
	// the paid steps' protocol, without a cost and without a result.
	KindEffect StepKind = "effect"
	// KindApproval steps wait for an operator's approve or reject.
	KindApproval StepKind = "approval"
)

// StepKinds lists every kind.
var StepKinds = []StepKind{KindLocal, KindGo, KindExec, KindActivity, KindPaid, KindEffect, KindApproval}

// Remote reports whether the step goes through the paid protocol (intent,
// submit, reference, look-up, park) and names a vendor.
func (k StepKind) Remote() bool { return k == KindPaid || k == KindEffect }

// Costs reports whether the step's vendor charges for it: its tasks have
// costs, budgets cover it, and an operator may rework it (one more charge).
func (k StepKind) Costs() bool { return k == KindPaid }

// Gate reports whether the step waits for a person (approve or reject).
func (k StepKind) Gate() bool { return k == KindApproval }

// Free reports whether the step costs nothing and runs on a worker (local,
// go, exec, activity); a parked one an operator may retry or abandon.
func (k StepKind) Free() bool { return !k.Remote() && !k.Gate() && k != "" }

// Valid reports whether k is one of StepKinds.
func (k StepKind) Valid() bool {
	for _, x := range StepKinds {
		if k == x {
			return true
		}
	}
	return false
}
