package workflows

// Helpers of the model-based test (episode_model_test.go): a vendor that can
// misbehave in the ways the simulator cannot by itself, activity wrappers
// that play a worker dying around an activity's side effect, and a parser
// for the remedy commands an episode shows.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"allot"
	"allot/activities"
	"allot/paidvendor/paidvendortest"
	"allot/paidvendor/vendorapi"
)

// vendorFaults are the faults of one phase of a model run: the simulator's
// own (SetFaults), and those the wrapping handler adds.
type vendorFaults struct {
	Sim paidvendortest.SimFaults
	// Revoked: every call answers 401, as when the worker's key was
	// revoked, until the operator rotates it.
	Revoked bool
	// Reject: submissions answer 422, a definite refusal; nothing charged.
	Reject bool
	// FailTasks: polls report every task failed.
	FailTasks bool
	// CorruptResults: result downloads come back altered, so their sha256
	// does not match the vendor's.
	CorruptResults bool
	// LoseTasks: polls answer 404, as if the vendor lost the task.
	LoseTasks bool
}

func (f vendorFaults) String() string {
	var parts []string
	if p := f.Sim.LoseResponseAfterAccept; p > 0 {
		parts = append(parts, fmt.Sprintf("lose-response=%.2f", p))
	}
	if p := f.Sim.FailBeforeAccept; p > 0 {
		parts = append(parts, fmt.Sprintf("fail-before-accept=%.2f", p))
	}
	for _, b := range []struct {
		on   bool
		name string
	}{
		{f.Sim.NoLookup, "no-lookup"}, {f.Revoked, "key-revoked"}, {f.Reject, "reject-submit"},
		{f.FailTasks, "tasks-fail"}, {f.CorruptResults, "results-corrupt"}, {f.LoseTasks, "tasks-lost"},
	} {
		if b.on {
			parts = append(parts, b.name)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// faultyVendor serves the simulator through the faults of the current phase.
type faultyVendor struct {
	sim *paidvendortest.Simulator

	mu     sync.Mutex
	faults vendorFaults
}

func (v *faultyVendor) set(f vendorFaults) error {
	// A vendor that ignores idempotency keys charges every send: a second
	// send of one task cannot hide behind the vendor's deduplication.
	f.Sim.IgnoreIdempotency = true
	if err := v.sim.SetFaults(f.Sim); err != nil {
		return err
	}
	v.mu.Lock()
	v.faults = f
	v.mu.Unlock()
	return nil
}

func (v *faultyVendor) get() vendorFaults {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.faults
}

func (v *faultyVendor) setRevoked(revoked bool) {
	v.mu.Lock()
	v.faults.Revoked = revoked
	v.mu.Unlock()
}

// endpoint names the vendor call a request makes.
func vendorEndpoint(r *http.Request) string {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == vendorapi.TasksPath:
		return "submit"
	case r.Method == http.MethodGet && r.URL.Path == vendorapi.TasksPath:
		return "lookup"
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, vendorapi.TasksPath+"/") && strings.HasSuffix(r.URL.Path, "/result"):
		return "result"
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, vendorapi.TasksPath+"/"):
		return "poll"
	}
	return "other"
}

func modelVendorError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(vendorapi.ErrorBody{Error: vendorapi.ErrorDetail{Code: code, Message: msg}})
}

func (v *faultyVendor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f := v.get()
	ep := vendorEndpoint(r)
	if f.Revoked {
		modelVendorError(w, http.StatusUnauthorized, vendorapi.CodeUnauthorized, "the API key was revoked (model fault)")
		return
	}
	switch ep {
	case "submit":
		if f.Reject {
			modelVendorError(w, http.StatusUnprocessableEntity, "quota_exceeded", "submission refused (model fault); nothing was charged")
			return
		}
	case "poll":
		if f.LoseTasks {
			modelVendorError(w, http.StatusNotFound, vendorapi.CodeNotFound, "no such task (model fault)")
			return
		}
		if f.FailTasks {
			rec := httptest.NewRecorder()
			v.sim.ServeHTTP(rec, r)
			var t vendorapi.Task
			if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &t) != nil {
				modelCopyRecorded(w, rec)
				return
			}
			t.Status, t.SHA256, t.Error = "failed", "", "the render farm caught fire (model fault)"
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_ = json.NewEncoder(w).Encode(t)
			return
		}
	case "result":
		if f.CorruptResults {
			rec := httptest.NewRecorder()
			v.sim.ServeHTTP(rec, r)
			body := append([]byte(nil), rec.Body.Bytes()...)
			if rec.Code == http.StatusOK && len(body) > 0 {
				body[len(body)-1] ^= 0x20 // one bit: the sha256 no longer matches
			}
			rec.Body = bytes.NewBuffer(body)
			modelCopyRecorded(w, rec)
			return
		}
	}
	v.sim.ServeHTTP(w, r)
}

func modelCopyRecorded(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, vs := range rec.Header() {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// workerRestart is the error a wrapped activity returns when it plays a
// worker that died: before the activity ran, or after its side effect, so
// that its result is lost. Temporal retries it.
func workerRestart(activity, when string) error {
	return temporal.NewApplicationError(fmt.Sprintf("worker restarted %s %s (model fault)", when, activity), "WorkerRestart")
}

// maxInjectedRestarts: restarts are injected into the first attempts of an
// activity only. The test environment gives an activity up after 10
// attempts where Temporal retries without limit.
const maxInjectedRestarts = 6

var (
	modelContextType = reflect.TypeFor[context.Context]()
	modelErrorType   = reflect.TypeFor[error]()
)

// registerRestartable registers every activity of acts again, under its
// own name, through a worker that may die: with the probabilities the
// model draws, an attempt fails before the activity runs, or runs it and
// then fails as if the worker died before reporting the result (the side
// effect happened, its result is lost). Temporal retries both. Every
// activity is wrapped, whatever the workflow calls, by reflection.
func registerRestartable(env *testsuite.TestWorkflowEnvironment, m *modelRun, acts *activities.Activities) {
	v := reflect.ValueOf(acts)
	for i := range v.NumMethod() {
		name, fn := v.Type().Method(i).Name, v.Method(i)
		ft := fn.Type()
		if ft.NumIn() < 1 || ft.In(0) != modelContextType || ft.NumOut() < 1 || ft.Out(ft.NumOut()-1) != modelErrorType {
			continue
		}
		fail := func(when string) []reflect.Value {
			outs := make([]reflect.Value, ft.NumOut())
			for j := range outs {
				outs[j] = reflect.New(ft.Out(j)).Elem()
			}
			outs[len(outs)-1].Set(reflect.ValueOf(workerRestart(name, when)))
			return outs
		}
		wrapped := reflect.MakeFunc(ft, func(args []reflect.Value) []reflect.Value {
			ctx := args[0].Interface().(context.Context)
			if name == "LoadEpisode" {
				if g := m.loadGate; g != nil {
					<-g // a reopening command arrives with the start, before the load (Update-With-Start)
				}
			}
			before, after := m.drawRestart()
			if activity.GetInfo(ctx).Attempt > maxInjectedRestarts {
				before, after = false, false
			}
			if before {
				m.logf("    worker dies before %s", name)
				return fail("before")
			}
			outs := fn.Call(args)
			if after {
				res := "ok"
				if err, _ := outs[len(outs)-1].Interface().(error); err != nil {
					res = "error: " + errorType(err)
				}
				m.logf("    worker dies after %s (%s); the result is lost", name, res)
				return fail("after")
			}
			return outs
		})
		env.RegisterActivityWithOptions(wrapped.Interface(), activity.RegisterOptions{Name: name, DisableAlreadyRegisteredCheck: true})
	}
}

// remedyCmd is a remedy line parsed into what an operator runs.
type remedyCmd struct {
	verb    string // resolve | rework | lookup
	action  allot.Action
	step    string
	reason  string
	pipe    string
	episode string
}

// update is the Update the command sends (lookup sends none by itself).
func (c remedyCmd) update() string {
	if c.verb == "rework" {
		return ReworkUpdate
	}
	return ResolveUpdate
}

// parseRemedy reads a `starter episode ...` command line as a shell would
// and checks that it is complete: every flag known, every value given.
func parseRemedy(line string) (remedyCmd, error) {
	words, err := SplitCommand(line)
	if err != nil {
		return remedyCmd{}, err
	}
	if len(words) < 3 || words[0] != "starter" || words[1] != "episode" {
		return remedyCmd{}, fmt.Errorf("not a `starter episode` command")
	}
	c := remedyCmd{verb: words[2]}
	actions := 0
	for i := 3; i < len(words); i++ {
		value := func() (string, error) {
			if i+1 >= len(words) || strings.HasPrefix(words[i+1], "--") {
				return "", fmt.Errorf("flag %s has no value", words[i])
			}
			i++
			return words[i], nil
		}
		var err error
		switch words[i] {
		case "--pipeline":
			c.pipe, err = value()
		case "--episode":
			c.episode, err = value()
		case "--step":
			c.step, err = value()
		case "--reason":
			c.reason, err = value()
		case "--retry":
			c.action, actions = allot.ActionRetry, actions+1
		case "--resubmit":
			c.action, actions = allot.ActionResubmit, actions+1
		case "--abandon":
			c.action, actions = allot.ActionAbandon, actions+1
		case "--adopt":
			c.action, actions = allot.ActionAdopt, actions+1
			_, err = value()
		default:
			err = fmt.Errorf("unknown argument %q", words[i])
		}
		if err != nil {
			return remedyCmd{}, err
		}
	}
	if c.pipe == "" || c.episode == "" || c.step == "" {
		return remedyCmd{}, fmt.Errorf("it does not name the pipeline, episode and step")
	}
	switch c.verb {
	case "resolve":
		if actions != 1 {
			return remedyCmd{}, fmt.Errorf("resolve needs exactly one of --retry, --resubmit, --abandon, --adopt")
		}
		if c.action == allot.ActionAbandon && c.reason == "" {
			return remedyCmd{}, fmt.Errorf("--abandon without --reason")
		}
	case "rework":
		if actions != 0 {
			return remedyCmd{}, fmt.Errorf("rework takes no resolve flag")
		}
		c.action = allot.ActionRework
	case "lookup":
		if actions != 0 {
			return remedyCmd{}, fmt.Errorf("lookup takes no resolve flag")
		}
		c.action = allot.ActionAdopt // what the lookup leads to
	default:
		return remedyCmd{}, fmt.Errorf("unknown command %q", c.verb)
	}
	return c, nil
}

// stateView is the part of the state query a refused command must leave
// as it was.
func modelStateView(st EpisodeState) string {
	b, err := json.Marshal(struct {
		Stage     allot.Stage
		Steps     any
		Attention *Attention
	}{st.Stage, st.Steps, st.Attention})
	if err != nil {
		return "unencodable: " + err.Error()
	}
	return string(b)
}

// summary shows a state on one line for the step log.
func modelSummary(st EpisodeState) string {
	var b strings.Builder
	b.WriteString(string(st.Stage))
	if a := st.Attention; a != nil {
		fmt.Fprintf(&b, " [%s on %s r%d, %s]", a.ErrorType, a.Step, a.Revision, a.TaskState)
	}
	if r := st.Retrying; r != nil {
		msg := r.Error
		if len(msg) > 90 {
			msg = msg[:90] + "..."
		}
		fmt.Fprintf(&b, " [retrying %s: %s x%d: %s]", r.Activity, r.ErrorType, r.Attempts, msg)
	}
	b.WriteString(" |")
	for _, s := range st.Steps {
		if s.Kind == "paid" {
			fmt.Fprintf(&b, " %s:%s/r%d", s.Name, s.Status, s.Revision)
		} else {
			fmt.Fprintf(&b, " %s:%s", s.Name, s.Status)
		}
	}
	return b.String()
}
