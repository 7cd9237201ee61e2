package operator

import (
	"context"
	"fmt"
	"strings"

	"allot"
	"allot/workflows"
)

// MaxApproveEach is the most episodes one bulk approve sends to: the page
// shows at most this many waiting episodes, and a longer list is more
// than a person has looked at.
const MaxApproveEach = 100

// ApproveEachInput approves episodes of one pipeline at their approval
// gates, each with a decision of its own that records the same reason and
// the same operator (docs/design.md, "The operator page").
type ApproveEachInput struct {
	Pipeline string
	// EpisodeIDs are the episodes to approve, as the operator saw them;
	// empty approves every episode of the pipeline that the ledger holds
	// waiting for approval now (it needs EpisodeCommands.Ledger).
	EpisodeIDs []string
	Reason     string
	By         string
}

// ApproveEachResult says what a bulk approve did to each episode: those
// it approved, in the order given, and those the episode's workflow
// refused (one approved meanwhile by someone else, say), each with why.
type ApproveEachResult struct {
	Pipeline string            `json:"pipeline"`
	Approved []ApprovedEpisode `json:"approved"`
	Refused  []EpisodeRefusal  `json:"refused,omitempty"`
}

// ApprovedEpisode is one episode a bulk approve approved, with the state
// the approval left it in.
type ApprovedEpisode struct {
	EpisodeID string `json:"episode_id"`
	CommandResult
}

// EpisodeRefusal is one episode a bulk command did not change, and why.
type EpisodeRefusal struct {
	EpisodeID string `json:"episode_id"`
	Type      string `json:"type,omitempty"`
	Message   string `json:"message"`
}

// ApproveEach sends an approve to each episode in turn. The input is
// checked whole before anything is sent: a bad list sends nothing. One
// episode's refusal does not stop the others, since each decision stands
// on its own; an error that is no refusal (Temporal unreachable, the
// context's end) stops the rest and returns what was done so far with it.
func (o *EpisodeCommands) ApproveEach(ctx context.Context, in ApproveEachInput) (ApproveEachResult, error) {
	return o.approveEach(ctx, in, o.Send)
}

// approveEach is ApproveEach with the send it makes per episode.
func (o *EpisodeCommands) approveEach(ctx context.Context, in ApproveEachInput, send func(context.Context, CommandInput) (CommandResult, error)) (ApproveEachResult, error) {
	p, err := o.Pipelines.Get(in.Pipeline)
	if err != nil {
		return ApproveEachResult{}, err
	}
	out := ApproveEachResult{Pipeline: p.Name}
	if err := checkTexts("--reason", in.Reason); err != nil {
		return out, err
	}
	if in.By, err = allot.Actor(in.By); err != nil {
		return out, &allot.Error{Type: allot.InvalidInput, Message: err.Error()}
	}
	ids := in.EpisodeIDs
	if len(ids) == 0 {
		if ids, err = o.waitingApproval(ctx, p.Name); err != nil {
			return out, err
		}
		if len(ids) == 0 {
			return out, allot.Errorf(allot.NotReady, "no episode of %s waits for approval: nothing was sent; see them with `%s`", p.Name, allot.EpisodesCommand(p.Name))
		}
	}
	seen := map[string]bool{}
	for _, id := range ids {
		switch {
		case strings.TrimSpace(id) == "":
			return out, allot.Errorf(allot.InvalidInput, "the list of episodes to approve has an empty ID: nothing was sent; name each episode, e.g. 2026-W32-0")
		case seen[id]:
			return out, allot.Errorf(allot.InvalidInput, "episode %s is listed twice: nothing was sent; name each episode once", id)
		}
		seen[id] = true
	}
	if len(ids) > MaxApproveEach {
		return out, allot.Errorf(allot.InvalidInput, "%d episodes to approve at once, more than %d: nothing was sent; approve them in parts of at most %d", len(ids), MaxApproveEach, MaxApproveEach)
	}
	for _, id := range ids {
		res, err := send(ctx, CommandInput{Pipeline: p.Name, EpisodeID: id, Update: workflows.ApproveUpdate,
			Request: workflows.DecisionRequest{Reason: in.Reason, By: in.By}})
		switch typ := allot.ErrorType(err); {
		case err == nil:
			out.Approved = append(out.Approved, ApprovedEpisode{EpisodeID: id, CommandResult: res})
		case typ != "" && ctx.Err() == nil:
			out.Refused = append(out.Refused, EpisodeRefusal{EpisodeID: id, Type: typ, Message: allot.ErrorMessage(err)})
		default:
			return out, fmt.Errorf("approve episode %s of %s (%d approved before it): %w", id, p.Name, len(out.Approved), err)
		}
	}
	return out, nil
}

// waitingApproval are the IDs of the pipeline's episodes the ledger holds
// waiting for approval, oldest period first.
func (o *EpisodeCommands) waitingApproval(ctx context.Context, pipelineName string) ([]string, error) {
	if o.Ledger == nil {
		return nil, fmt.Errorf("operator: approving every waiting episode reads the ledger, and none is open")
	}
	eps, err := o.Ledger.ListEpisodes(ctx, pipelineName, "")
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range eps {
		if allot.Outcome(e.Outcome) == allot.OutcomeWaitingApproval {
			ids = append(ids, e.ID)
		}
	}
	return ids, nil
}
