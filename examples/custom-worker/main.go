// Command custom-worker is allot's worker with a step and a vendor of its
// own. It is what a team writes to put its own work under allot: register
// Go step functions and Go vendor adapters by name, then run allot's
// worker with them. The pipelines file next to it uses both.
//
//	ALLOT_PIPELINES=examples/custom-worker/pipelines.toml OUTBOX_DIR=/tmp/outbox go run ./examples/custom-worker
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"allot"
	"allot/app"
	"allot/paidvendor"
	"allot/step"
)

func main() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	outboxDir := os.Getenv("OUTBOX_DIR")
	if outboxDir == "" {
		outboxDir = filepath.Join(os.TempDir(), "allot-outbox")
	}
	opts, err := app.TemporalOptions("", "", logger)
	if err == nil {
		err = app.RunWorker(ctx, app.WorkerConfig{
			Config:   app.ConfigFromEnv(),
			Temporal: opts,
			Logger:   logger,
			// kind = "go", func = "tally" in the pipelines file.
			Steps: map[string]step.Func{"tally": tally},
			// [[vendor]] name = "outbox", adapter = "go".
			Vendors: map[string]paidvendor.Factory{
				"outbox": func(apiKey string) (paidvendor.Submitter, error) { return newOutbox(outboxDir) },
			},
		})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "custom-worker:", err)
		os.Exit(1)
	}
}

// tally is a Go step: it writes the episode's digest and returns a small
// result. It depends only on its input, so running it again (after a
// crash, say) writes the same file; allot records the file's sha256 and
// never runs the step again once it completed with that file intact.
func tally(ctx context.Context, in step.Input) (step.Output, error) {
	topic := in.Params["topic"]
	if topic == "" {
		// Retrying will not add the parameter: park the episode for an
		// operator instead of retrying.
		return step.Output{}, step.Parkf("step %s needs params.topic", in.Step)
	}
	digest := fmt.Sprintf("%s digest for %s (episode %s)\n", topic, in.Period, in.EpisodeID)
	if err := os.WriteFile(filepath.Join(in.Dir, "digest.txt"), []byte(digest), 0o644); err != nil {
		return step.Output{}, err // retried with backoff
	}
	result, err := json.Marshal(map[string]any{"topic": topic, "bytes": len(digest)})
	if err != nil {
		return step.Output{}, err
	}
	return step.Output{Files: []string{"digest.txt"}, Result: result}, nil
}

// outbox is a Go vendor adapter for an effect step: it delivers one
// message per idempotency key into a directory another system reads, and
// can say by key what it delivered, so allot never delivers twice.
type outbox struct{ dir string }

func newOutbox(dir string) (paidvendor.Submitter, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return outbox{dir: dir}, nil
}

// Submit delivers the message atomically: written aside, then linked into
// place, which fails if the key was delivered before.
func (o outbox) Submit(ctx context.Context, req paidvendor.SubmitRequest) (paidvendor.Task, error) {
	msg, err := json.Marshal(req)
	if err != nil {
		return paidvendor.Task{}, err
	}
	tmp, err := os.CreateTemp(o.dir, ".incoming-*")
	if err != nil {
		return paidvendor.Task{}, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(msg); err != nil {
		tmp.Close()
		return paidvendor.Task{}, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return paidvendor.Task{}, err
	}
	if err := tmp.Close(); err != nil {
		return paidvendor.Task{}, err
	}
	if err := os.Link(tmp.Name(), o.path(req.IdempotencyKey)); err != nil && !errors.Is(err, fs.ErrExist) {
		return paidvendor.Task{}, err
	}
	return delivered(req.IdempotencyKey, req.Kind), nil
}

// LookupByIdempotencyKey says whether the key was delivered.
func (o outbox) LookupByIdempotencyKey(ctx context.Context, key string) (paidvendor.Task, error) {
	if _, err := os.Stat(o.path(key)); errors.Is(err, fs.ErrNotExist) {
		return paidvendor.Task{}, paidvendor.ErrNotFound
	} else if err != nil {
		return paidvendor.Task{}, err
	}
	return delivered(key, ""), nil
}

// Capabilities are what allot can promise with the outbox, which the
// worker records and `starter vendor show outbox` prints: a key is
// delivered once, and asked about by key.
func (o outbox) Capabilities() allot.VendorCapabilities {
	return allot.VendorCapabilities{IdempotencyKey: true, Lookup: allot.LookupByKey, Cost: allot.CostOnTask, Bill: allot.BillNone}
}

func (o outbox) path(key string) string { return filepath.Join(o.dir, key+".json") }

func delivered(key, kind string) paidvendor.Task {
	return paidvendor.Task{ID: "outbox-" + key, IdempotencyKey: key, Kind: kind, Status: paidvendor.StatusSucceeded}
}
