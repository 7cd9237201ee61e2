package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"allot"
	"allot/app"
	"allot/internal/ledger"
	"allot/pipeline"
)

// ledgerAccess is how a command that asks the ledger one thing opens it.
type ledgerAccess int

const (
	// viewLedger reads it once, read-only (readLedger).
	viewLedger ledgerAccess = iota
	// writeLedger opens the existing ledger to write (openLedgerToWrite).
	writeLedger
)

// ledgerCommand is the end of most commands: ask the ledger, opened as
// access says, with the pipeline file, and print the answer.
func ledgerCommand[T any](ctx context.Context, c *cli, access ledgerAccess, ask func(*pipeline.Set, *ledger.Ledger) (T, error), text func(io.Writer, T)) error {
	res, err := askLedger(ctx, c, access, ask)
	return emit(c, res, err, text)
}

// askLedger loads the pipeline file, then asks the ledger, opened as access
// says. The answer comes back beside an error too: import's refusal has
// its conflicts to print.
func askLedger[T any](ctx context.Context, c *cli, access ledgerAccess, ask func(*pipeline.Set, *ledger.Ledger) (T, error)) (T, error) {
	var none T
	set, err := c.pipelines()
	if err != nil {
		return none, err
	}
	if access == viewLedger {
		return readLedger(ctx, c, func(led *ledger.Ledger) (T, error) { return ask(set, led) })
	}
	led, err := c.openLedgerToWrite(ctx)
	if err != nil {
		return none, err
	}
	defer led.Close()
	return ask(set, led)
}

// pipelines is the pipeline file, loaded once a command: the checks a
// command makes before it opens the ledger and the ledger's answer read
// the same one.
func (c *cli) pipelines() (*pipeline.Set, error) {
	if c.pipelineSet == nil && c.pipelineErr == nil {
		c.pipelineSet, c.pipelineErr = c.cfg.LoadPipelines()
	}
	return c.pipelineSet, c.pipelineErr
}

// openLedgerReadOnly opens the ledger for a command that reads it for a
// while (it may follow a worker's progress); one that reads once uses
// readLedger.
func (c *cli) openLedgerReadOnly(ctx context.Context) (*ledger.Ledger, error) {
	led, err := ledger.OpenReadOnly(ctx, c.cfg.Ledger)
	return led, c.ledgerError(err)
}

// openLedgerToWrite opens the ledger for a command that writes it. Only the
// worker creates a ledger: a mistyped --ledger is refused, not made into a
// new, empty ledger.
func (c *cli) openLedgerToWrite(ctx context.Context) (*ledger.Ledger, error) {
	led, err := ledger.OpenExisting(ctx, c.cfg.Ledger)
	return led, c.ledgerError(err)
}

// readLedger answers one query from the ledger, opened read-only: it creates
// and changes no file and works on a read-only copy (invariant 19).
func readLedger[T any](ctx context.Context, c *cli, query func(*ledger.Ledger) (T, error)) (T, error) {
	var res T
	err := ledger.View(ctx, c.cfg.Ledger, func(led *ledger.Ledger) error {
		var err error
		res, err = query(led)
		return err
	})
	return res, c.ledgerError(err)
}

// viewLedger opens the ledger read-only for one read: ledger.View at the
// command's --ledger, for what the engine reads on its own (a run's
// preview).
func (c *cli) viewLedger(ctx context.Context, read func(*ledger.Ledger) error) error {
	return c.ledgerError(ledger.View(ctx, c.cfg.Ledger, read))
}

// ledgerError adds to a ledger that does not exist where the ledger comes
// from and the command that creates one: the worker's first start.
func (c *cli) ledgerError(err error) error {
	if !errors.Is(err, ledger.ErrNotCreated) {
		return err
	}
	return fmt.Errorf("%w (--ledger or %s), or start the worker once to create a new ledger there: %s", err, app.EnvLedger, workerCommand(c.cfg.Ledger))
}

// workerCommand starts the worker on the ledger at url, which it creates if
// there is none. A SQLite path is made absolute, a password redacted.
func workerCommand(url string) string {
	if path, ok := strings.CutPrefix(url, "sqlite:"); ok {
		if abs, err := filepath.Abs(path); err == nil {
			url = "sqlite:" + abs
		}
	} else {
		url = app.RedactURL(url)
	}
	return allot.WorkerCommand(url)
}
