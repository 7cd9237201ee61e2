// Package step is what every step of an episode is given and gives back,
// whatever runs it: a Go function registered in a worker (WorkerConfig.Steps
// in allot/app), a command (kind "exec", which gets the Input as JSON on stdin
// and as ALLOT_* environment variables), or an activity of a worker in any
// language (kind "activity", which gets the Input as its argument and
// returns an Output). allot keeps the guarantees around it: the episode
// exists, the step runs the plan the episode was allocated with, a step
// completed with intact outputs never runs again, and its outputs are
// recorded in the ledger with their sha256. See docs/design.md, "Steps".
package step

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Input is what a step is given.
type Input struct {
	Pipeline      string    `json:"pipeline"`
	EpisodeID     string    `json:"episode_id"`
	Period        string    `json:"period"`
	Sequence      int       `json:"sequence"`
	AllocationKey string    `json:"allocation_key"`
	NominalTime   time.Time `json:"nominal_time"`
	Step          string    `json:"step"`
	// Steps names the episode's steps in order: its pinned plan.
	Steps []string `json:"steps"`
	// Revision counts how often the step was reopened (by a rework or a
	// reassembly) before this run: 0 the first time.
	Revision int               `json:"revision"`
	Params   map[string]string `json:"params,omitempty"`
	// IdempotencyKey is stable for (episode, step, revision): a step that
	// acts on another system passes it along, so that a retry is
	// recognised as the same work.
	IdempotencyKey string `json:"idempotency_key"`
	// Dir is the episode's artifact directory; a step writes its files
	// there and names them in Output.Files.
	Dir string `json:"dir"`
	// Artifacts are the outputs of the steps before this one, in order.
	Artifacts []Artifact `json:"artifacts"`
	// Claimed is the input the episode claimed at allocation, for
	// pipelines that consume a queue of inputs; nil otherwise.
	Claimed *Claimed `json:"claimed,omitempty"`
}

// Artifact is one recorded output file of an earlier step.
type Artifact struct {
	Step      string `json:"step"`
	Path      string `json:"path"`
	SHA256    string `json:"sha256"`
	Revision  int    `json:"revision,omitempty"`
	RemoteRef string `json:"remote_ref,omitempty"`
}

// Claimed is an input an episode claimed (see `starter input add`).
type Claimed struct {
	Ref     string          `json:"ref"`
	ReadyAt time.Time       `json:"ready_at"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Output is what a step gives back: the files it wrote (paths relative to
// Input.Dir, or absolute paths inside it) and, optionally, a small JSON
// result. Both are recorded in the ledger; the files with their sha256.
type Output struct {
	Files  []string        `json:"files,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
}

// MaxResultBytes bounds Output.Result: results go into the ledger and the
// workflow's history; files are for anything larger.
const MaxResultBytes = 64 << 10

// Func is a step written in Go. An error it returns is retried with
// backoff (the episode shows the step as retrying); an error wrapped with
// Park stops the retries and parks the episode until an operator retries or
// abandons the step.
type Func func(ctx context.Context, in Input) (Output, error)

// Park marks err as one that retrying will not fix: the episode parks with
// its message (error type StepFailed) instead of retrying.
func Park(err error) error {
	if err == nil {
		return nil
	}
	return &parkError{err: err}
}

// Parkf is Park(fmt.Errorf(format, args...)).
func Parkf(format string, args ...any) error { return Park(fmt.Errorf(format, args...)) }

// IsPark reports whether err was marked with Park.
func IsPark(err error) bool {
	var p *parkError
	return errors.As(err, &p)
}

type parkError struct{ err error }

func (e *parkError) Error() string { return e.err.Error() }
func (e *parkError) Unwrap() error { return e.err }
