package operator

import (
	"context"
	"strings"
	"testing"

	"allot"
	"allot/internal/ledgertest"
	"allot/workflows"
)

// Every free text an operator command takes is bounded before anything is
// sent or written: the zero Schedules and EpisodeCommands have no client,
// so getting past the check would panic. import's texts are importer's
// test of this name.
func TestFreeTextIsBoundedBeforeAnythingHappens(t *testing.T) {
	ctx := context.Background()
	set := ledgertest.BudgetPipelines(t)
	long := strings.Repeat("n", allot.MaxTextLen+1)
	s := &Schedules{Pipelines: set}
	for name, call := range map[string]func() error{
		"schedule pause":   func() error { _, err := s.Pause(ctx, "weekly", ScheduleNote{Text: long}); return err },
		"schedule unpause": func() error { _, err := s.Unpause(ctx, "weekly", ScheduleNote{Text: "bell\a"}); return err },
		"schedule pause --by": func() error {
			_, err := s.Pause(ctx, "weekly", ScheduleNote{By: long, Text: "why"})
			return err
		},
		"schedule create": func() error { _, err := s.Create(ctx, ScheduleInput{Pipeline: "weekly", Note: long}); return err },
		"episode approve": func() error {
			_, err := (&EpisodeCommands{Pipelines: set}).Send(ctx, CommandInput{Pipeline: "weekly", EpisodeID: "2026-W32-0", Update: "approve", Request: workflows.DecisionRequest{Reason: long}})
			return err
		},
		"episode approve --by": func() error {
			_, err := (&EpisodeCommands{Pipelines: set}).Send(ctx, CommandInput{Pipeline: "weekly", EpisodeID: "2026-W32-0", Update: "approve", Request: workflows.DecisionRequest{By: long}})
			return err
		},
	} {
		err := call()
		if !isType(err, allot.InvalidInput) || !strings.Contains(err.Error(), "--") {
			t.Errorf("%s with a text over the bound: %v, want InvalidInput naming the flag", name, err)
		}
	}
}

// Temporal keeps a note on a schedule and no actor: the note sent names
// who acted, --by else $USER, with the reason after it when there is one.
func TestScheduleNoteNamesWhoActed(t *testing.T) {
	t.Setenv("USER", "maria")
	for n, want := range map[ScheduleNote]string{
		{By: "alice", Text: "launch freeze"}: "by alice: launch freeze",
		{Text: "vendor outage"}:              "by maria: vendor outage",
		{By: "bob"}:                          "by bob",
	} {
		if got, err := n.note(); err != nil || got != want {
			t.Errorf("%+v: note %q, %v; want %q", n, got, err, want)
		}
	}
}
