package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/pipeline"
)

// inputCommand dispatches `starter input <subcommand>`: the inputs a
// pipeline with [pipeline.inputs] consumes, one per new episode.
func inputCommand(ctx context.Context, c *cli, args []string) error {
	return dispatch(ctx, c, "input", inputSubcommands, args)
}

// inputSubcommands are `starter input`'s subcommands.
var inputSubcommands = map[string]subcommand{
	"add":      inputAdd,
	"list":     inputList,
	"withdraw": inputWithdraw,
}

func inputAdd(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("input add", false)
	var (
		in                          operator.InputAddInput
		readyAt, payload, payloadAt string
	)
	fs.StringVar(&in.Pipeline, "pipeline", "", "pipeline that consumes inputs (required)")
	fs.StringVar(&in.Ref, "ref", "", "the input's reference, unique in the pipeline (required); adding it again is a no-op")
	fs.StringVar(&readyAt, "ready-at", "", "ready from this time, RFC3339 (default: now); a run claims inputs ready by its nominal time")
	fs.StringVar(&payload, "payload", "", "JSON every step gets in its input (claimed.payload)")
	fs.StringVar(&payloadAt, "payload-file", "", "read the JSON payload from this file")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if in.Pipeline == "" || in.Ref == "" {
		return usageError{errors.New("--pipeline and --ref are required")}
	}
	if payload != "" && payloadAt != "" {
		return usageError{errors.New("give --payload or --payload-file, not both")}
	}
	if readyAt != "" {
		t, err := time.Parse(time.RFC3339, readyAt)
		if err != nil {
			return usageError{fmt.Errorf("--ready-at %q is not RFC3339: write it like 2026-08-03T09:00:00Z", readyAt)}
		}
		in.ReadyAt = t
	}
	switch {
	case payloadAt != "":
		data, err := os.ReadFile(payloadAt)
		if err != nil {
			return usageError{fmt.Errorf("--payload-file: %w", err)}
		}
		in.Payload = data
	case payload != "":
		in.Payload = json.RawMessage(payload)
	}
	if len(in.Payload) > 0 && !json.Valid(in.Payload) {
		return usageError{errors.New("the payload is not JSON: give a JSON value, e.g. --payload '{\"title\": \"Launch notes\"}'")}
	}
	return ledgerCommand(ctx, c, writeLedger, func(set *pipeline.Set, led *ledger.Ledger) (ledger.AddInputResult, error) {
		return operator.AddInput(ctx, led, set, in)
	}, printInputAdded)
}

func printInputAdded(w io.Writer, res ledger.AddInputResult) {
	what := "added"
	if !res.Added {
		what = "already there"
	}
	fmt.Fprintf(w, "%s\t%s/%s (%s, ready at %s)\n", what, res.Input.Pipeline, res.Input.Ref, res.Input.State, res.Input.ReadyAt.Format(time.RFC3339))
}

func inputList(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("input list", false)
	var pipelineName, state string
	fs.StringVar(&pipelineName, "pipeline", "", "pipeline (required)")
	fs.StringVar(&state, "state", "", "only inputs in this state: ready, claimed or withdrawn")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if pipelineName == "" {
		return usageError{errors.New("--pipeline is required")}
	}
	return ledgerCommand(ctx, c, viewLedger, func(_ *pipeline.Set, led *ledger.Ledger) ([]ledger.Input, error) {
		if err := c.knownPipeline(ctx, led, pipelineName); err != nil {
			return nil, err
		}
		return operator.ListInputs(ctx, led, pipelineName, ledger.InputState(state))
	}, printInputs)
}

func printInputs(w io.Writer, ins []ledger.Input) {
	fmt.Fprintln(w, "REF\tSTATE\tREADY AT\tEPISODE")
	for _, in := range ins {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", in.Ref, in.State, in.ReadyAt.Format(time.RFC3339), dash(in.EpisodeID))
	}
}

func inputWithdraw(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("input withdraw", false)
	var pipelineName, ref string
	fs.StringVar(&pipelineName, "pipeline", "", "pipeline (required)")
	fs.StringVar(&ref, "ref", "", "the input to withdraw (required); only an input no episode has claimed")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if pipelineName == "" || ref == "" {
		return usageError{errors.New("--pipeline and --ref are required")}
	}
	return ledgerCommand(ctx, c, writeLedger, func(set *pipeline.Set, led *ledger.Ledger) (ledger.Input, error) {
		return operator.WithdrawInput(ctx, led, set, pipelineName, ref)
	}, printInputWithdrawn)
}

func printInputWithdrawn(w io.Writer, in ledger.Input) {
	fmt.Fprintf(w, "withdrawn\t%s/%s\n", in.Pipeline, in.Ref)
}
