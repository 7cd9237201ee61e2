package allot_test

import (
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/sdk/temporal"

	"allot"
)

// One error type: its Type survives wrapping, a Temporal application
// error's type is read the same way, a sentinel given to Wrapf stays an
// errors.Is target, and the message for people is the error's own.
func TestErrorTypeIsReadFromAnyLayer(t *testing.T) {
	sentinel := &allot.Error{Type: allot.EpisodeNotFound, Message: "episode not found"}
	consent := errors.New("backfill needs consent")
	for name, tc := range map[string]struct {
		err      error
		wantType string
		wantMsg  string
	}{
		"an Error":             {allot.Errorf(allot.InvalidInput, "--from %s is after --to", "x"), allot.InvalidInput, "--from x is after --to"},
		"a wrapped sentinel":   {fmt.Errorf("%w: pipeline weekly has no episode 2026-W32-5", sentinel), allot.EpisodeNotFound, "episode not found: pipeline weekly has no episode 2026-W32-5"},
		"a Temporal error":     {fmt.Errorf("update: %w", temporal.NewNonRetryableApplicationError("not at the gate", allot.NotReady, nil)), allot.NotReady, "not at the gate"},
		"Wrapf":                {allot.Wrapf(consent, allot.ConsentRequired, "starts %d runs", 3), allot.ConsentRequired, "starts 3 runs"},
		"an untyped I/O error": {errors.New("connection refused"), "", "connection refused"},
	} {
		if got := allot.ErrorType(tc.err); got != tc.wantType {
			t.Errorf("%s: ErrorType = %q, want %q", name, got, tc.wantType)
		}
		if got := allot.ErrorMessage(tc.err); got != tc.wantMsg {
			t.Errorf("%s: ErrorMessage = %q, want %q", name, got, tc.wantMsg)
		}
	}
	if err := fmt.Errorf("x: %w", sentinel); !errors.Is(err, sentinel) {
		t.Error("a typed sentinel is no longer an errors.Is target")
	}
	if err := allot.Wrapf(consent, allot.ConsentRequired, "starts 3 runs"); !errors.Is(err, consent) {
		t.Error("Wrapf's sentinel is not an errors.Is target")
	}
}
