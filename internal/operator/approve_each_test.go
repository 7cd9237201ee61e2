package operator

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/workflows"
)

// recordingSend stands in for Send: it records each command and answers
// with the error refuse names for the episode, if any.
type recordingSend struct {
	sent   []CommandInput
	refuse map[string]error
}

func (r *recordingSend) send(_ context.Context, in CommandInput) (CommandResult, error) {
	r.sent = append(r.sent, in)
	if err := r.refuse[in.EpisodeID]; err != nil {
		return CommandResult{}, err
	}
	return CommandResult{WorkflowID: in.Pipeline + "/" + in.EpisodeID, Update: in.Update}, nil
}

func approveEachCommands(t *testing.T) (*EpisodeCommands, []string) {
	l := newTestLedger(t)
	ctx := context.Background()
	var ids []string
	for i := range 3 {
		ep := l.Allocate("weekly", mon.Add(time.Duration(i)*time.Hour))
		ids = append(ids, ep.ID)
	}
	// The first and the last wait; the middle one does not.
	for _, id := range []string{ids[0], ids[2]} {
		if err := l.led.RecordEpisodeOutcome(ctx, "weekly", id, allot.OutcomeWaitingApproval, "", mon); err != nil {
			t.Fatal(err)
		}
	}
	return &EpisodeCommands{Client: idleClient(t), Pipelines: testPipelines(t), TaskQueue: "allot", Ledger: l.led}, ids
}

// Each episode gets a decision of its own, carrying the same reason and
// the same operator; a refusal of one does not stop the others.
func TestApproveEachDecidesEachEpisodeAndGoesOnPastARefusal(t *testing.T) {
	cmds, ids := approveEachCommands(t)
	rec := &recordingSend{refuse: map[string]error{
		ids[1]: allot.Errorf(allot.NotReady, "episode %s does not wait for approval", ids[1]),
	}}
	res, err := cmds.approveEach(context.Background(), ApproveEachInput{Pipeline: "weekly", EpisodeIDs: ids, Reason: "cuts checked", By: "ana"}, rec.send)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.sent) != 3 {
		t.Fatalf("sent %d commands, want one per episode (3): %+v", len(rec.sent), rec.sent)
	}
	for i, in := range rec.sent {
		want := CommandInput{Pipeline: "weekly", EpisodeID: ids[i], Update: workflows.ApproveUpdate,
			Request: workflows.DecisionRequest{Reason: "cuts checked", By: "ana"}}
		if !reflect.DeepEqual(in, want) {
			t.Errorf("command %d = %+v, want %+v", i, in, want)
		}
	}
	var approved []string
	for _, a := range res.Approved {
		approved = append(approved, a.EpisodeID)
	}
	if want := []string{ids[0], ids[2]}; !reflect.DeepEqual(approved, want) {
		t.Errorf("approved %v, want %v", approved, want)
	}
	if len(res.Refused) != 1 || res.Refused[0].EpisodeID != ids[1] || res.Refused[0].Type != allot.NotReady ||
		!strings.Contains(res.Refused[0].Message, "does not wait") {
		t.Errorf("refused %+v, want %s refused as not ready with its workflow's words", res.Refused, ids[1])
	}
}

// An error that is no refusal (Temporal unreachable) stops the rest: what
// was done is returned with it, and nothing more is sent.
func TestApproveEachStopsAtAnErrorThatIsNoRefusal(t *testing.T) {
	cmds, ids := approveEachCommands(t)
	rec := &recordingSend{refuse: map[string]error{ids[1]: errors.New("connection refused")}}
	res, err := cmds.approveEach(context.Background(), ApproveEachInput{Pipeline: "weekly", EpisodeIDs: ids, Reason: "ok", By: "ana"}, rec.send)
	if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "1 approved before it") {
		t.Fatalf("err = %v, want the cause and how many were approved before it", err)
	}
	if len(rec.sent) != 2 {
		t.Errorf("sent %d commands, want the loop stopped at the failing one (2)", len(rec.sent))
	}
	if len(res.Approved) != 1 || res.Approved[0].EpisodeID != ids[0] {
		t.Errorf("approved %+v, want the first kept in the result", res.Approved)
	}
}

// No list approves what the ledger holds waiting, and only that.
func TestApproveEachWithoutAListApprovesTheWaitingEpisodes(t *testing.T) {
	cmds, ids := approveEachCommands(t)
	rec := &recordingSend{}
	res, err := cmds.approveEach(context.Background(), ApproveEachInput{Pipeline: "weekly", Reason: "ok", By: "ana"}, rec.send)
	if err != nil {
		t.Fatal(err)
	}
	var sent []string
	for _, in := range rec.sent {
		sent = append(sent, in.EpisodeID)
	}
	if want := []string{ids[0], ids[2]}; !reflect.DeepEqual(sent, want) {
		t.Errorf("sent to %v, want the waiting episodes %v", sent, want)
	}
	if len(res.Approved) != 2 {
		t.Errorf("approved %+v, want both", res.Approved)
	}
}

// A bad list is refused whole, before anything is sent.
func TestApproveEachRefusesABadListBeforeSending(t *testing.T) {
	cmds, ids := approveEachCommands(t)
	long := make([]string, MaxApproveEach+1)
	for i := range long {
		long[i] = fmt.Sprintf("2026-W32-%d", i)
	}
	ctx := context.Background()
	for name, tc := range map[string]struct {
		in       ApproveEachInput
		wantType string
		wantText string
	}{
		"unknown pipeline": {ApproveEachInput{Pipeline: "monthly", EpisodeIDs: ids[:1], By: "ana"}, allot.PipelineNotFound, "monthly"},
		"empty ID":         {ApproveEachInput{Pipeline: "weekly", EpisodeIDs: []string{ids[0], " "}, By: "ana"}, allot.InvalidInput, "empty ID"},
		"listed twice":     {ApproveEachInput{Pipeline: "weekly", EpisodeIDs: []string{ids[0], ids[2], ids[0]}, By: "ana"}, allot.InvalidInput, "episode " + ids[0] + " is listed twice"},
		"too many":         {ApproveEachInput{Pipeline: "weekly", EpisodeIDs: long, By: "ana"}, allot.InvalidInput, "more than 100"},
		"bad reason":       {ApproveEachInput{Pipeline: "weekly", EpisodeIDs: ids[:1], Reason: "a\x00b", By: "ana"}, allot.InvalidInput, "--reason"},
	} {
		rec := &recordingSend{}
		_, err := cmds.approveEach(ctx, tc.in, rec.send)
		if got := allot.ErrorType(err); got != tc.wantType || !strings.Contains(allot.ErrorMessage(err), tc.wantText) {
			t.Errorf("%s: %v (type %q), want %s naming %q", name, err, got, tc.wantType, tc.wantText)
		}
		if len(rec.sent) != 0 {
			t.Errorf("%s: sent %d commands before refusing", name, len(rec.sent))
		}
	}
}

// With none waiting, the refusal names the command that lists episodes.
func TestApproveEachWithNoneWaitingIsRefused(t *testing.T) {
	l := newTestLedger(t)
	l.Allocate("weekly", mon)
	cmds := &EpisodeCommands{Client: idleClient(t), Pipelines: testPipelines(t), TaskQueue: "allot", Ledger: l.led}
	rec := &recordingSend{}
	_, err := cmds.approveEach(context.Background(), ApproveEachInput{Pipeline: "weekly", By: "ana"}, rec.send)
	if allot.ErrorType(err) != allot.NotReady || !strings.Contains(allot.ErrorMessage(err), allot.EpisodesCommand("weekly")) {
		t.Errorf("err = %v, want not ready naming `%s`", err, allot.EpisodesCommand("weekly"))
	}
	if len(rec.sent) != 0 {
		t.Errorf("sent %d commands with none waiting", len(rec.sent))
	}
}
