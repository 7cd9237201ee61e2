package app_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"

	"allot/app"
	"allot/step"
)

// A worker of your own runs allot's workflows and activities plus your Go
// steps: a step with kind = "go" and func = "word-count" in the pipeline
// file runs this function. It connects to Temporal as envconfig says
// (TEMPORAL_ADDRESS, a profile, ...) and opens the ledger ALLOT_LEDGER
// names; it returns when ctx ends. (Not run here: it needs a Temporal
// server; examples/custom-worker is a whole one, with its test.)
func ExampleRunWorker() {
	wordCount := func(ctx context.Context, in step.Input) (step.Output, error) {
		text := in.Params["text"]
		if text == "" {
			// Parked for a person, with what to fix: retrying would not help.
			return step.Output{}, step.Parkf("step %s needs params.text", in.Step)
		}
		out := fmt.Sprintf("%d bytes\n", len(text))
		// Files go in in.Dir, the episode's artifact folder.
		if err := os.WriteFile(filepath.Join(in.Dir, "count.txt"), []byte(out), 0o644); err != nil {
			return step.Output{}, err // retried with backoff
		}
		return step.Output{Files: []string{"count.txt"}}, nil
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	opts, err := app.TemporalOptions("", "", logger)
	if err == nil {
		err = app.RunWorker(ctx, app.WorkerConfig{
			Config:   app.ConfigFromEnv(),
			Temporal: opts,
			Logger:   logger,
			Steps:    map[string]step.Func{"word-count": wordCount},
		})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}
