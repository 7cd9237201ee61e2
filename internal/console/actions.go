package console

// What a signed-in operator can do on the page (docs/design.md, "The
// operator page"). Each action runs the CLI's own code path in package
// operator, so it refuses what the CLI refuses with the same message, and
// records who (the signed-in operator) and why (the form's reason) where
// the CLI does.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"go.temporal.io/sdk/client"

	"allot"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/pipeline"
	"allot/workflows"
)

// Actions is what the page's actions act through: the ledger opened to
// write, the pipeline file and Temporal, as the CLI's commands reach them.
type Actions struct {
	Ledger    *ledger.Ledger
	Pipelines *pipeline.Set
	Episodes  *operator.EpisodeCommands
	Schedules *operator.Schedules
	// Temporal signals the episodes parked on a raised budget; nil leaves
	// them to their own timers.
	Temporal client.Client
}

// Action names, the form's "act" field.
const (
	ActApprove         = "approve"
	ActApproveAll      = "approve-all"
	ActReject          = "reject"
	ActResolve         = "resolve"
	ActSetLimit        = "set-limit"
	ActAcknowledge     = "acknowledge"
	ActVendorPause     = "vendor-pause"
	ActVendorResume    = "vendor-resume"
	ActSchedulePause   = "schedule-pause"
	ActScheduleUnpause = "schedule-unpause"
)

// Act is an action the page offers on an item once an operator has signed
// in: its name, its button's label and the form's fixed fields.
type Act struct {
	Action string
	Label  string
	Fields map[string]string
	// Unit is the currency a set-limit form's amount is typed in, Value
	// the amount it starts with.
	Unit, Value string
	// Exits are the resolve exits the parked step offers (Exit*).
	Exits []string
}

// The exits of a resolve form, as its select sends them.
const (
	ExitRetry    = "retry"
	ExitResubmit = "resubmit"
	ExitAbandon  = "abandon"
	ExitAdopt    = "adopt"
)

// exitLabels say what each exit does, in the form.
var exitLabels = map[string]string{
	ExitRetry:    "retry (the same task, looked up first)",
	ExitResubmit: "resubmit (sends again)",
	ExitAbandon:  "abandon",
	ExitAdopt:    "adopt a reference",
}

// Do runs one action for operator by, from the form f, and says what it
// did. A refusal is the operator package's error, unchanged.
func (a *Actions) Do(ctx context.Context, by string, f url.Values) (string, error) {
	reason := strings.TrimSpace(f.Get("reason"))
	if reason == "" {
		return "", allot.Errorf(allot.InvalidInput, "the page asks why for every action: fill in the reason (the ledger keeps it with who acted)")
	}
	if err := checkForm(f); err != nil {
		return "", err
	}
	pipelineName, episodeID := f.Get("pipeline"), f.Get("episode")
	switch action := f.Get("act"); action {
	case ActApprove, ActReject, ActResolve:
		in := operator.CommandInput{Pipeline: pipelineName, EpisodeID: episodeID, Update: map[string]string{
			ActApprove: workflows.ApproveUpdate, ActReject: workflows.RejectUpdate, ActResolve: workflows.ResolveUpdate}[action],
			Request: workflows.DecisionRequest{Reason: reason, By: by}}
		if action == ActResolve {
			in.Request.Step = f.Get("step")
			choice := operator.ResolveChoice{}
			switch f.Get("resolve") {
			case "retry":
				choice.Retry = true
			case "resubmit":
				choice.Resubmit = true
			case "abandon":
				choice.Abandon = true
			case "adopt":
				choice.Adopt = strings.TrimSpace(f.Get("ref"))
			}
			if err := choice.Apply(&in.Request); err != nil {
				return "", err
			}
		}
		res, err := a.Episodes.Send(ctx, in)
		if err != nil {
			return "", err
		}
		if len(res.BudgetShort) > 0 {
			return fmt.Sprintf("%s sent to episode %s of %s; a budget still refuses step %s: %s", in.Update, episodeID, pipelineName, in.Request.Step, strings.Join(res.BudgetRaises, "; ")), nil
		}
		return fmt.Sprintf("%s sent to episode %s of %s by %s: it is %s now", in.Update, episodeID, pipelineName, by, res.State.Stage), nil
	case ActApproveAll:
		ids := strings.Fields(f.Get("episodes"))
		if len(ids) == 0 {
			return "", allot.Errorf(allot.InvalidInput, "the form names no episodes to approve: reload the page, which lists those that wait")
		}
		res, err := a.Episodes.ApproveEach(ctx, operator.ApproveEachInput{Pipeline: pipelineName, EpisodeIDs: ids, Reason: reason, By: by})
		if err != nil {
			return "", err
		}
		var approved []string
		for _, r := range res.Approved {
			approved = append(approved, r.EpisodeID)
		}
		msg := fmt.Sprintf("approved %d of %d episodes of %s by %s, a decision each: %s", len(res.Approved), len(ids), res.Pipeline, by, strings.Join(approved, ", "))
		for _, r := range res.Refused {
			msg += fmt.Sprintf("; episode %s was not approved: %s", r.EpisodeID, r.Message)
		}
		return msg, nil
	case ActSetLimit:
		limit, err := operator.ParseLimitAmount(a.Pipelines, f.Get("budget"), f.Get("limit"))
		if err != nil {
			return "", err
		}
		res, err := operator.RaiseBudget(ctx, a.Ledger, operator.RaiseInput{Pipelines: a.Pipelines, Budget: f.Get("budget"), Period: f.Get("period"),
			Limit: limit, Reason: reason, By: by, RequestID: f.Get("request_id")})
		if err != nil {
			return "", err
		}
		operator.NudgeParked(ctx, a.Temporal, &res)
		r := res.Raise
		lim := allot.Money{Amount: r.Limit, Currency: r.Currency}
		if r.Change == ledger.LimitUnchanged {
			return fmt.Sprintf("budget %s period %s is %s already: nothing was recorded", r.Budget, r.Period, lim), nil
		}
		return fmt.Sprintf("budget %s period %s is %s now, set by %s: %s", r.Budget, r.Period, lim, r.By, r.Reason), nil
	case ActAcknowledge:
		res, err := operator.AcknowledgeOutside(ctx, a.Ledger, operator.AcknowledgeInput{Pipelines: a.Pipelines, Budget: f.Get("budget"), Period: f.Get("period"), Reason: reason, By: by})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("acknowledged %d charge(s) outside budget %s period %s by %s: %s; %d left open", len(res.Acknowledged), res.Budget, res.Period, by, reason, res.Outside.OpenCount), nil
	case ActVendorPause:
		v, err := operator.PauseVendor(ctx, a.Ledger, a.Pipelines, operator.VendorPauseInput{Name: f.Get("vendor"), Reason: reason, By: by, Polls: f.Get("polls") != ""})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("vendor %s is %s: its steps wait until `%s`", v.Name, v.Status, allot.VendorResumeCommand(v.Name)), nil
	case ActVendorResume:
		v, err := operator.ResumeVendorBy(ctx, a.Ledger, a.Pipelines, operator.VendorResumeInput{Name: f.Get("vendor"), By: by, Reason: reason})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("vendor %s is %s: its waiting steps go on within seconds", v.Name, v.Status), nil
	case ActSchedulePause, ActScheduleUnpause:
		if a.Schedules == nil {
			return "", allot.Errorf(allot.InvalidInput, "this page has no Temporal connection to reach the schedules: run `starter schedule %s --pipeline %s --note TEXT`", strings.TrimPrefix(action, "schedule-"), pipelineName)
		}
		note := operator.ScheduleNote{By: by, Text: reason}
		if action == ActSchedulePause {
			if _, err := a.Schedules.Pause(ctx, pipelineName, note); err != nil {
				return "", err
			}
			return fmt.Sprintf("the schedule of %s is paused by %s: %s", pipelineName, by, reason), nil
		}
		if _, err := a.Schedules.Unpause(ctx, pipelineName, note); err != nil {
			return "", err
		}
		sw, err := operator.CatchUpAfterUnpause(ctx, a.Schedules, a.Ledger, pipelineName)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("the schedule of %s is unpaused by %s; catch-up (%s): %d missed times, %d started, %d skipped",
			pipelineName, by, sw.Policy, len(sw.Missed), len(sw.Started), len(sw.Skipped)), nil
	default:
		return "", &allot.Error{Type: allot.InvalidInput, Message: fmt.Sprintf("the page has no action %q: its actions are approve, approve-all, reject, resolve, set-limit, acknowledge, vendor-pause, vendor-resume, schedule-pause and schedule-unpause", action)}
	}
}

// checkForm refuses a form that lacks what its action needs, in the form's
// words: the operator package's refusals name the CLI's flags (--episode,
// --adopt REF), which a person at the page never typed. A field the page
// fills itself (the episode, the step) is missing only from a form that is
// not the page's, or is out of date: reload.
func checkForm(f url.Values) error {
	missing := func(field, what string) error {
		if strings.TrimSpace(f.Get(field)) != "" {
			return nil
		}
		return allot.Errorf(allot.InvalidInput, "the form names no %s: reload the page, whose forms name theirs", what)
	}
	var errs []error
	switch f.Get("act") {
	case ActApprove, ActReject, ActResolve:
		errs = append(errs, missing("pipeline", "pipeline"), missing("episode", "episode"))
		if f.Get("act") != ActResolve {
			break
		}
		errs = append(errs, missing("step", "step"))
		switch f.Get("resolve") {
		case ExitRetry, ExitResubmit, ExitAbandon:
		case ExitAdopt:
			if strings.TrimSpace(f.Get("ref")) == "" {
				errs = append(errs, allot.Errorf(allot.InvalidInput, "adopting needs the vendor's reference of the task: fill in the reference box"))
			}
		default:
			errs = append(errs, allot.Errorf(allot.InvalidInput, "choose what to do with step %s: one of the exits the form offers", f.Get("step")))
		}
	case ActApproveAll:
		errs = append(errs, missing("pipeline", "pipeline"))
	case ActAcknowledge:
		errs = append(errs, missing("budget", "budget"), missing("period", "period"))
	case ActSetLimit:
		errs = append(errs, missing("budget", "budget"), missing("period", "period"))
		if strings.TrimSpace(f.Get("limit")) == "" {
			errs = append(errs, allot.Errorf(allot.InvalidInput, "fill in the new limit, in the budget's currency, such as 120.00"))
		}
	case ActVendorPause, ActVendorResume:
		errs = append(errs, missing("vendor", "vendor"))
	case ActSchedulePause, ActScheduleUnpause:
		errs = append(errs, missing("pipeline", "pipeline"))
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// statusOf is the HTTP status of an action's refusal.
func statusOf(err error) int {
	switch allot.ErrorType(err) {
	case allot.InvalidInput:
		return http.StatusUnprocessableEntity
	case allot.EpisodeNotFound:
		return http.StatusNotFound
	case "":
		return http.StatusInternalServerError
	default:
		return http.StatusConflict
	}
}

// actView is an Act with the session its form carries.
type actView struct {
	Session session
	Act     Act
}

// needView is a NeedItem with the session its forms carry.
type needView struct {
	Session session
	Item    NeedItem
}

// actOf builds an Act in a template: action, label, then field name and
// value pairs.
func actOf(action, label string, kv ...string) Act {
	a := Act{Action: action, Label: label, Fields: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		a.Fields[kv[i]] = kv[i+1]
	}
	return a
}
