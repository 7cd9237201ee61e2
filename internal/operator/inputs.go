package operator

import (
	"context"
	"encoding/json"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

// InputAddInput is one input to add (starter input add).
type InputAddInput struct {
	Pipeline string
	Ref      string
	ReadyAt  time.Time // zero: now
	Payload  json.RawMessage
}

// AddInput adds an input to a pipeline that consumes inputs. It is
// idempotent on the reference; the same reference with other data is
// refused (InputConflict) and nothing is written.
func AddInput(ctx context.Context, led *ledger.Ledger, set *pipeline.Set, in InputAddInput) (ledger.AddInputResult, error) {
	if err := consumesInputs(set, in.Pipeline); err != nil {
		return ledger.AddInputResult{}, err
	}
	res, err := led.AddInput(ctx, ledger.Input{Pipeline: in.Pipeline, Ref: in.Ref, ReadyAt: in.ReadyAt, Payload: in.Payload})
	return res, err
}

// ListInputs lists a pipeline's inputs in claim order; state "" lists all.
func ListInputs(ctx context.Context, led *ledger.Ledger, pipelineName string, state ledger.InputState) ([]ledger.Input, error) {
	switch state {
	case "", ledger.InputReady, ledger.InputClaimed, ledger.InputWithdrawn:
	default:
		return nil, allot.Errorf(allot.InvalidInput, "input state %q is unknown: use %s, %s or %s", state, ledger.InputReady, ledger.InputClaimed, ledger.InputWithdrawn)
	}
	ins, err := led.Inputs(ctx, pipelineName, state)
	if ins == nil && err == nil {
		ins = []ledger.Input{}
	}
	return ins, err
}

// WithdrawInput withdraws an input no episode has claimed.
func WithdrawInput(ctx context.Context, led *ledger.Ledger, set *pipeline.Set, pipelineName, ref string) (ledger.Input, error) {
	if err := consumesInputs(set, pipelineName); err != nil {
		return ledger.Input{}, err
	}
	in, err := led.WithdrawInput(ctx, pipelineName, ref)
	return in, err
}

func consumesInputs(set *pipeline.Set, name string) error {
	p, err := set.Get(name)
	if err != nil {
		return err
	}
	if !p.ClaimsInputs() {
		return allot.Errorf(allot.InvalidInput, "pipeline %s does not consume inputs: add [pipeline.inputs] with claim = %q to it in the pipeline file", p.Name, pipeline.ClaimOldestReady)
	}
	return nil
}
