package report

// starter check: the ledger's audit (ledger.Audit), the files it names, and
// optionally the vendors' bills. Everything here reads: the ledger in one
// read-only transaction, the files by hashing them, the vendors by listing
// their charges.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"allot"
	"allot/activities"
	"allot/artifacts"
	"allot/internal/ledger"
	"allot/internal/reconcile"
	"allot/paidvendor"
	"allot/pipeline"
)

// CheckInput selects what a check covers.
type CheckInput struct {
	Pipeline string // "" = every pipeline
	// StaleIntent: an intent without a reference older than this is an
	// unknown outcome (also the grace an episode has to report its first
	// outcome and its run); zero means ledger.DefaultStaleAfter.
	StaleIntent time.Duration
	Now         time.Time // zero: now
	// Vendors are the vendors whose charges to reconcile with the ledger
	// (check --vendor); none when empty.
	Vendors []VendorCharges
	// Pipelines names the vendor of a cost whose episode has no pinned
	// plan (the step's vendor as configured now), the budgets whose limits
	// and reservations are checked, and the vendors' idempotency horizons
	// (intents older are reported); may be nil.
	Pipelines *pipeline.Set
	// Workflows, when set, also asks Temporal about the workflow of every
	// unsettled episode (CheckWorkflows); its Grace defaults to
	// StaleIntent.
	Workflows *WorkflowCheckInput
}

// ChargeLister lists a vendor's charges (paidvendor.HTTPClient.Charges).
type ChargeLister interface {
	Charges(ctx context.Context) ([]paidvendor.Charge, error)
}

// VendorCharges is one vendor check --vendor looks at: its name as steps
// give it (pipeline.DefaultVendor for the default one) and its charge
// list. A vendor whose charges cannot be listed (no URL, no key) has
// Unavailable saying why instead; one with no bill to reconcile (an
// adapter without a charge list, only effect steps) has NoBill.
type VendorCharges struct {
	Name        string
	Charges     ChargeLister
	Unavailable string
	NoBill      string
	// Bill identifies the bill the charges are listed from
	// (reconcile.SameBill: a hash of its URL and API key, never the key,
	// never stored). Vendors with one Bill have one bill, which is
	// reconciled once against the costs of all of them, under the first
	// one's name (reconcile.Account); "" is a bill of its own.
	Bill string
}

// KindChargeOtherVendor means check --vendor found a charge for a task whose
// cost the ledger books under a vendor of another account.
const KindChargeOtherVendor = "charge_other_vendor"

// CheckResult lists the violations found. OK means there are none and
// every vendor asked for (--vendor) was reconciled, at least one.
type CheckResult struct {
	Pipeline   string             `json:"pipeline,omitempty"`
	OK         bool               `json:"ok"`
	Violations []ledger.Violation `json:"violations"`
	// Artifacts is how many files were hashed.
	Artifacts int `json:"artifacts_checked"`
	// WorkflowsChecked says whether Temporal was asked about the
	// episodes' workflows.
	WorkflowsChecked bool `json:"workflows_checked"`
	// Vendors says, for --vendor, what became of each vendor.
	Vendors []VendorCheck `json:"vendors,omitempty"`
	// Incomplete says why the check is not OK although it found no
	// violation: a vendor it could not reconcile, or none reconciled.
	Incomplete string `json:"incomplete,omitempty"`
}

// What check --vendor did with a vendor (VendorCheck.Status).
const (
	VendorReconciled    = "reconciled"     // its charges were compared with the ledger's costs
	VendorNotReconciled = "not_reconciled" // it has a bill that could not be read: Reason says why
	VendorNoBill        = "no_bill"        // nothing to reconcile: Reason says why
)

// VendorCheck is one vendor's reconciliation: how many charges it listed
// and how many ledger costs are booked to it, or why it was not
// reconciled.
type VendorCheck struct {
	Name    string `json:"name"`
	Status  string `json:"status"`
	Charges int    `json:"charges"`
	Costs   int    `json:"costs"`
	Reason  string `json:"reason,omitempty"`
	// Pending charges name a task whose send is still unanswered within
	// the vendor's bill_grace: judged on a later check.
	Pending int `json:"pending,omitempty"`
	// SharedAccount names the other vendors on the same account (URL and
	// key): the account's one bill was reconciled against all their costs.
	SharedAccount []string `json:"shared_account,omitempty"`
}

// Check audits the ledger of one pipeline ("" = all) and the files it
// names, with the default threshold and no vendor (starter check).
func Check(ctx context.Context, led *ledger.Ledger, pipelineName string) (CheckResult, error) {
	return Audit(ctx, led, CheckInput{Pipeline: pipelineName})
}

// Audit runs every check of starter check: the ledger's (ledger.Audit),
// every file the ledger names (it exists and has its sha256), and, for
// each of in.Vendors, its charges against the ledger's costs: charges the
// ledger does not know (money spent without a record), ledger costs the
// vendor did not charge, and amounts that differ. It writes nothing.
func Audit(ctx context.Context, led *ledger.Ledger, in CheckInput) (CheckResult, error) {
	if in.Pipeline != "" {
		if err := pipeline.ValidateName(in.Pipeline); err != nil {
			return CheckResult{}, err
		}
	}
	if in.StaleIntent < 0 {
		return CheckResult{}, allot.Errorf(allot.InvalidInput, "the stale-intent threshold %s is negative: give a duration like 1h", in.StaleIntent)
	}
	opts := ledger.AuditOptions{Pipeline: in.Pipeline, StaleAfter: in.StaleIntent, Now: in.Now, WithRefs: len(in.Vendors) > 0}
	if in.Pipelines != nil {
		for _, b := range in.Pipelines.Budgets() {
			opts.Budgets = append(opts.Budgets, ledger.LimitOf(b))
		}
		opts.WithRefs = opts.WithRefs || len(opts.Budgets) > 0
		opts.Horizon = func(vendor string) time.Duration { return in.Pipelines.Limits(vendor).Horizon() }
	}
	// The audit reads what the file holds: first, that SQLite can read
	// all of it.
	if err := led.CheckIntegrity(ctx); err != nil {
		return CheckResult{}, err
	}
	a, err := led.Audit(ctx, opts)
	if err != nil {
		return CheckResult{}, err
	}
	vs := a.Violations
	missing, err := missingReservations(ctx, led, in, a.Tasks)
	if err != nil {
		return CheckResult{}, err
	}
	vs = append(vs, missing...)
	fileVs, hashed := checkArtifacts(a.Artifacts)
	vs = append(vs, fileVs...)
	res := CheckResult{Pipeline: in.Pipeline, Artifacts: hashed}
	recorded, openDrift, err := recordedDrift(ctx, led, in)
	if err != nil {
		return CheckResult{}, err
	}
	vs = append(vs, openDrift...)
	late, err := latePeriods(ctx, led, in)
	if err != nil {
		return CheckResult{}, err
	}
	vs = append(vs, late...)
	if w := in.Workflows; w != nil {
		wi := *w
		if wi.Grace == 0 {
			wi.Grace = in.StaleIntent
			if wi.Grace == 0 {
				wi.Grace = ledger.DefaultStaleAfter
			}
		}
		if wi.Now.IsZero() {
			wi.Now = in.Now
		}
		names := []string{in.Pipeline}
		if in.Pipeline == "" {
			if names, err = led.PipelineNames(ctx); err != nil {
				return CheckResult{}, err
			}
		}
		found, err := CheckWorkflows(ctx, led, names, wi)
		if err != nil {
			return CheckResult{}, err
		}
		vs = append(vs, found...)
		res.WorkflowsChecked = true
	}
	var reconciled int
	var unreconciled []string
	// One account, one bill: the vendors sharing an account are reconciled
	// together, by the first of them (docs/import-and-check.md, "Check").
	accounts := map[string][]string{}
	for _, v := range in.Vendors {
		if v.Bill != "" && v.NoBill == "" && v.Unavailable == "" && v.Charges != nil {
			accounts[v.Bill] = append(accounts[v.Bill], v.Name)
		}
	}
	byAccount := map[string]VendorCheck{}
	// What the vendors' bills say each task cost, for the budgets' check
	// of the charges (chargesAgainstBudgets).
	billed := map[ledger.PaidTaskRef]allot.Money{}
	for _, v := range in.Vendors {
		check := VendorCheck{Name: v.Name, Status: VendorNoBill, Reason: v.NoBill}
		names := []string{v.Name}
		if len(accounts[v.Bill]) > 1 {
			names = accounts[v.Bill]
			check.SharedAccount = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == v.Name })
		}
		switch {
		case v.NoBill != "":
		case v.Unavailable != "" || v.Charges == nil:
			check.Status, check.Reason = VendorNotReconciled, v.Unavailable
		case names[0] != v.Name:
			first := byAccount[v.Bill]
			check.Status, check.Charges, check.Costs = first.Status, first.Charges, costsOf(in, a, v.Name)
			check.Reason = fmt.Sprintf("one account (URL and key) with vendor %s: its bill was reconciled there, against the costs of both", names[0])
			if first.Status == VendorNotReconciled {
				check.Reason += ": " + first.Reason
			}
		default:
			found, c, err := reconcileVendor(ctx, in, a, v, names, billed, recorded)
			if err != nil {
				// One vendor that cannot be asked leaves the others and
				// the ledger's own checks standing.
				check.Status, check.Reason = VendorNotReconciled, err.Error()
				byAccount[v.Bill] = check
				break
			}
			vs = append(vs, found...)
			c.SharedAccount = check.SharedAccount
			check = c
			check.Status = VendorReconciled
			byAccount[v.Bill] = check
			reconciled++
		}
		if check.Status == VendorNotReconciled {
			unreconciled = append(unreconciled, check.Name)
		}
		res.Vendors = append(res.Vendors, check)
	}
	// The budgets against what was spent: the ledger's costs and, with
	// --vendor, the bills.
	overCharged, err := chargesAgainstBudgets(ctx, led, in, a, billed)
	if err != nil {
		return CheckResult{}, err
	}
	vs = append(vs, overCharged...)
	switch {
	case len(unreconciled) > 0:
		res.Incomplete = fmt.Sprintf("vendor %s not reconciled: give what each lacks, or leave --vendor out", strings.Join(unreconciled, ", "))
	case len(in.Vendors) > 0 && reconciled == 0:
		res.Incomplete = "--vendor reconciled no vendor: no vendor of the pipeline file has a bill to read (set ALLOT_VENDOR_URL or --vendor-url for the default vendor), or leave --vendor out"
	}
	ledger.SortViolations(vs)
	if vs == nil {
		vs = []ledger.Violation{}
	}
	res.Violations, res.OK = vs, len(vs) == 0 && res.Incomplete == ""
	return res, nil
}

// checkArtifacts hashes every file the ledger names, each path once.
// Relative paths are read from the current folder, as the worker wrote
// them.
func checkArtifacts(files []ledger.AuditArtifact) ([]ledger.Violation, int) {
	type result struct {
		sum string
		err error
	}
	hashed := map[string]result{}
	var out []ledger.Violation
	for _, f := range files {
		r, ok := hashed[f.Path]
		if !ok {
			r.sum, r.err = artifacts.SHA256File(f.Path)
			hashed[f.Path] = r
		}
		what := fmt.Sprintf("step %s's output", f.Step)
		look := "restore it from a backup, or rerun the step (a reassembly reruns the assembly and the steps after it)"
		if f.Paid {
			what = fmt.Sprintf("the result of paid step %s revision %d", f.Step, f.Revision)
			look = "restore it from a backup; the vendor may still hold the result (rework downloads a new one, for one more charge)"
		}
		switch {
		case r.err != nil:
			detail := fmt.Sprintf("%s, %s, cannot be read: %v: %s", what, f.Path, r.err, look)
			if errors.Is(r.err, os.ErrNotExist) {
				detail = fmt.Sprintf("%s, %s, is missing: %s", what, f.Path, look)
			}
			out = append(out, ledger.Violation{Kind: ledger.KindArtifactMissing, Pipeline: f.Pipeline, Episode: f.EpisodeID, Detail: detail})
		case !strings.EqualFold(r.sum, f.SHA256):
			out = append(out, ledger.Violation{Kind: ledger.KindArtifactMismatch, Pipeline: f.Pipeline, Episode: f.EpisodeID,
				Detail: fmt.Sprintf("%s, %s, has sha256 %s but the ledger recorded %s: the file was changed after it was verified; %s", what, f.Path, r.sum, f.SHA256, look)})
		}
	}
	return out, len(hashed)
}

// vendorOf names the vendor a cost is booked to, pipeline.DefaultVendor
// for the default one; "" when unknown.
func vendorOf(in CheckInput, c ledger.AuditCost) string {
	name, known := c.Vendor, c.StepKind != ""
	if !known && in.Pipelines != nil {
		if p, err := in.Pipelines.Get(c.Pipeline); err == nil {
			if s, ok := p.Step(c.Step); ok {
				name, known = s.Vendor, true
			}
		}
	}
	if !known {
		return ""
	}
	if name == "" {
		return pipeline.DefaultVendor
	}
	return name
}

// costsOf counts the ledger's costs booked to the vendor named.
func costsOf(in CheckInput, a ledger.Audit, name string) int {
	n := 0
	for _, c := range a.Costs {
		if vendorOf(in, c) == name {
			n++
		}
	}
	return n
}

// reconcileVendor compares one vendor account's charges, listed by v, with the
// ledger's costs booked to any vendor of names (v's and those sharing its
// account), line by line with the worker's own matcher (reconcile.Judge),
// so that check --vendor and the drift items never disagree. A line the
// reconciler recorded already (recorded: account, line, class) is not
// reported again: its drift item shows, or was acknowledged.
func reconcileVendor(ctx context.Context, in CheckInput, a ledger.Audit, v VendorCharges, names []string, billed map[ledger.PaidTaskRef]allot.Money, recorded map[string]bool) ([]ledger.Violation, VendorCheck, error) {
	check := VendorCheck{Name: v.Name}
	charges, err := v.Charges.Charges(ctx)
	if err != nil {
		return nil, check, fmt.Errorf("list its charges: %w (check its URL and API key)", err)
	}
	check.Charges = len(charges)
	now := in.Now
	if now.IsZero() {
		now = time.Now()
	}
	var settings pipeline.VendorBill
	if in.Pipelines != nil {
		settings = in.Pipelines.Bill(v.Name)
	}
	byRef, byKey := map[string]ledger.PaidTask{}, map[string]ledger.PaidTask{}
	for _, t := range a.Tasks {
		if t.RemoteRef != "" {
			byRef[t.RemoteRef] = t
		}
		if t.IdempotencyKey != "" {
			byKey[t.IdempotencyKey] = t
		}
	}
	costs, elsewhere := map[string]ledger.AuditCost{}, map[string]ledger.AuditCost{}
	for _, c := range a.Costs {
		switch vendor := vendorOf(in, c); {
		case slices.Contains(names, vendor):
			costs[c.RemoteRef] = c
		default:
			elsewhere[c.RemoteRef] = c
		}
	}
	check.Costs = costsOf(in, a, v.Name)
	inScope := func(p string) bool { return in.Pipeline == "" || p == in.Pipeline }
	seen := func(line string, class allot.DriftClass) bool {
		// The ledger keeps the bill under the first name (reconcile.Vendors).
		return recorded[driftKey(reconcile.Account(names[0]), line, class)]
	}

	// What the bill charged each task, net of refunds, for the budgets'
	// check; a sum that overflows is never used as a number.
	type charged struct {
		amounts    map[string]int64
		currencies []string
		overflow   bool
	}
	perTask := map[string]*charged{}
	named := map[string]bool{} // task references and keys some charge line names
	firstCharge := map[string]string{}
	var out []ledger.Violation
	for i, ch := range charges {
		id := ch.ID
		if id == "" {
			id = fmt.Sprintf("#%d", i+1)
		}
		if !ch.Refund {
			named[ch.TaskID], named[ch.IdempotencyKey] = true, true
		}
		c, ok := perTask[ch.TaskID]
		if !ok {
			c = &charged{amounts: map[string]int64{}}
			perTask[ch.TaskID] = c
		}
		amount := ch.Amount
		if ch.Refund {
			amount = -amount
		}
		if err := allot.AddTo(c.amounts, allot.Money{Amount: amount, Currency: ch.Currency}); err != nil {
			c.overflow = true
		}
		if !slices.Contains(c.currencies, ch.Currency) {
			c.currencies = append(c.currencies, ch.Currency)
		}

		f := reconcile.Facts{Vendor: v.Name, Line: ledger.BillLine{Account: reconcile.Account(names[0]), Vendor: v.Name, LineID: id, TaskRef: ch.TaskID,
			IdempotencyKey: ch.IdempotencyKey, Refund: ch.Refund, Amount: ch.Amount, Currency: ch.Currency, ChargedAt: ch.At}}
		f.Task, f.Known = byRef[ch.TaskID]
		if !f.Known && ch.IdempotencyKey != "" {
			f.Task, f.Known = byKey[ch.IdempotencyKey]
			f.ByKeyOnly = f.Known
		}
		task := ch.IdempotencyKey
		if task == "" {
			task = "ref:" + ch.TaskID
		}
		if !ch.Refund {
			if first, ok := firstCharge[task]; ok {
				f.Earlier = first
			} else {
				firstCharge[task] = id
			}
		}
		if f.Known && !inScope(f.Task.Pipeline) {
			continue
		}
		cost, booked := costs[ch.TaskID]
		if f.Known && !f.ByKeyOnly {
			f.Cost, f.HasCost = cost.CostEntry, booked
			if other, ok := elsewhere[ch.TaskID]; ok && !booked && !ch.Refund && f.Earlier == "" {
				// Its cost is booked under another account's vendor:
				// another entry would count it twice.
				out = append(out, ledger.Violation{Kind: KindChargeOtherVendor, Pipeline: f.Task.Pipeline, Episode: f.Task.EpisodeID,
					Detail: fmt.Sprintf("vendor %s charged %s for task %s, which is %s's reference, but the ledger books its cost (%s) under vendor %s, another account (URL or key): the ledger's entry stands, do not book it again; ask the vendor which account it charged, and correct the vendor's URL or key in the pipeline file if this is that vendor's account",
						v.Name, allot.Money{Amount: ch.Amount, Currency: ch.Currency}, ch.TaskID, describeTask(f.Task), allot.Money{Amount: other.Amount, Currency: other.Currency}, vendorOf(in, other))})
				continue
			}
		}
		verdict := reconcile.Judge(f, settings, now)
		switch {
		case verdict.Pending:
			check.Pending++
			continue
		case verdict.Class == "" || seen(id, verdict.Class):
			continue
		}
		found := ledger.Violation{Kind: checkKindOf(verdict.Class), Detail: verdict.Detail}
		if f.Known {
			found.Pipeline, found.Episode = f.Task.Pipeline, f.Task.EpisodeID
			if f.ByKeyOnly && f.Task.State == allot.PaidIntent {
				found.Fix = allot.LookupCommand(f.Task.Pipeline, f.Task.EpisodeID, f.Task.Step)
			}
		}
		out = append(out, found)
	}
	for ref, c := range perTask {
		t, known := byRef[ref]
		if !known {
			continue
		}
		bill(billed, t, c.amounts, c.currencies, c.overflow)
	}
	due := now.Add(-settings.Grace())
	for _, c := range sortedCosts(costs) {
		key := byRef[c.RemoteRef].IdempotencyKey
		if named[c.RemoteRef] || key != "" && named[key] || !inScope(c.Pipeline) || c.RecordedAt.After(due) || seen(allot.DriftLineOfCost(c.RemoteRef), allot.DriftUncharged) {
			continue
		}
		verdict := reconcile.JudgeUnbilled(v.Name, ledger.UnbilledCost{AuditCost: c, IdempotencyKey: key}, settings)
		out = append(out, ledger.Violation{Kind: ledger.KindCostUncharged, Pipeline: c.Pipeline, Episode: c.EpisodeID, Detail: verdict.Detail})
	}
	return out, check, nil
}

// Violation kinds of the drift classes check --vendor finds that the
// ledger's audit has no kind for.
const (
	KindDoubleCharge = "double_charge"
	KindRefunded     = "refunded"
	// KindDriftOpen: a drift item the worker's reconciler recorded, not
	// acknowledged yet.
	KindDriftOpen = "drift_open"
)

// checkKindOf is check's kind for a drift class.
func checkKindOf(c allot.DriftClass) string {
	switch c {
	case allot.DriftUnrecorded:
		return ledger.KindChargeUnrecorded
	case allot.DriftUncharged:
		return ledger.KindCostUncharged
	case allot.DriftAmountDiffers:
		return ledger.KindAmountDiffers
	case allot.DriftDoubleCharge:
		return KindDoubleCharge
	case allot.DriftRefunded:
		return KindRefunded
	}
	return string(c)
}

func driftKey(account, line string, class allot.DriftClass) string {
	return account + "\x00" + line + "\x00" + string(class)
}

// recordedDrift is every drift item of the ledger (open or acknowledged),
// keyed by account, line and class, and the open ones in scope as
// violations: what the reconciler found and nobody has settled.
func recordedDrift(ctx context.Context, led *ledger.Ledger, in CheckInput) (map[string]bool, []ledger.Violation, error) {
	recorded := map[string]bool{}
	var open []ledger.Violation
	f := ledger.DriftFilter{}
	for {
		items, err := led.DriftItems(ctx, f)
		if err != nil {
			return nil, nil, err
		}
		for _, d := range items {
			recorded[driftKey(d.Account, d.Line, d.Class)] = true
			if !d.AckedAt.IsZero() || in.Pipeline != "" && d.Pipeline != in.Pipeline {
				continue
			}
			open = append(open, ledger.Violation{Kind: KindDriftOpen, Pipeline: d.Pipeline, Episode: d.EpisodeID,
				Detail: fmt.Sprintf("drift item %d, vendor %s, %s, %s: %s", d.ID, d.Vendor, d.Class, allot.Money{Amount: d.Amount, Currency: d.Currency}, d.Detail),
				Fix:    allot.DriftAckCommand(d.ID, "what was done")})
		}
		if len(items) == 0 {
			return recorded, open, nil
		}
		f.AfterID = items[len(items)-1].ID
	}
}

// bill keeps what a vendor charged a task, when it charged in one
// currency without overflowing (anything else is reported by reconcile).
func bill(billed map[ledger.PaidTaskRef]allot.Money, t ledger.PaidTask, amounts map[string]int64, currencies []string, overflow bool) {
	if overflow || len(currencies) != 1 {
		return
	}
	billed[t.PaidTaskRef] = allot.Money{Amount: amounts[currencies[0]], Currency: currencies[0]}
}

func sortedCosts(m map[string]ledger.AuditCost) []ledger.AuditCost {
	out := make([]ledger.AuditCost, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b ledger.AuditCost) int { return strings.Compare(a.RemoteRef, b.RemoteRef) })
	return out
}

func describeTask(t ledger.PaidTask) string {
	return fmt.Sprintf("%s/%s step %s revision %d", t.Pipeline, t.EpisodeID, t.Step, t.Revision)
}

// HTTPVendors lists the vendors starter check --vendor looks at, with
// their charge lists: the default vendor at defaultURL with defaultKey
// (ALLOT_VENDOR_URL, ALLOT_VENDOR_API_KEY(_FILE)), and each [[vendor]] of
// set, an http one with its key from api_key_env or api_key_file. A vendor
// that is not configured here (no URL, no key) is Unavailable with what it
// lacks; one with no bill (other adapters, only effect steps) is NoBill.
func HTTPVendors(set *pipeline.Set, defaultURL string, defaultKey func() (string, error)) []VendorCharges {
	paid := reconcile.PaidVendors(set)
	def := VendorCharges{Name: pipeline.DefaultVendor}
	switch {
	case defaultURL == "" && paid[pipeline.DefaultVendor]:
		def.Unavailable = "no URL: set ALLOT_VENDOR_URL or pass --vendor-url, and its key in " + paidvendor.EnvVendorAPIKey + " or " + paidvendor.EnvVendorAPIKeyFile
	case defaultURL == "":
		def.NoBill = "no paid step uses it and ALLOT_VENDOR_URL is not set"
	default:
		if key, err := defaultKey(); err != nil {
			def.Unavailable = fmt.Sprintf("its key (%s): %v", defaultURL, err)
		} else if c, err := paidvendor.NewHTTPClient(defaultURL, key, nil); err != nil {
			def.Unavailable = err.Error()
		} else {
			def.Charges, def.Bill = c, reconcile.SameBill(defaultURL, key)
		}
	}
	vendors := []VendorCharges{def}
	for _, name := range set.VendorNames() {
		v, _ := set.Vendor(name)
		out := VendorCharges{Name: name}
		switch {
		case v.Adapter != pipeline.AdapterHTTP:
			out.NoBill = fmt.Sprintf("adapter %s has no charge list to read", v.Adapter)
		case !paid[name]:
			out.NoBill = "serves only effect steps, which cost nothing"
		default:
			if key, err := activities.VendorKeyOf(v).VendorAPIKey(context.Background()); err != nil {
				out.Unavailable = err.Error()
			} else if c, err := paidvendor.NewHTTPClient(v.URL, key, nil); err != nil {
				out.Unavailable = err.Error()
			} else {
				out.Charges, out.Bill = c, reconcile.SameBill(v.URL, key)
			}
		}
		vendors = append(vendors, out)
	}
	return vendors
}
