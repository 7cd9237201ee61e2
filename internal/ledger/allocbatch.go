package ledger

// Group commit of allocations. A durable commit (an fsync) costs more than
// everything else an allocation does, so concurrent allocations share one.
// A caller that finds no transaction of its batch key under way runs its
// request at once, alone, in its own goroutine and under its own ctx: a
// lone caller's allocation is the transaction Allocate always ran, and
// waits for nothing. Callers that come meanwhile queue; when the
// transaction ends, one goroutine takes every queued request (the whole
// queue, up to maxAllocBatch), runs them in one transaction in arrival
// order, commits once, answers each, and goes on until the queue is empty.
// Nothing waits on a timer to fill a batch.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// maxAllocBatch bounds the requests of one transaction. Each may run in a
// savepoint, which PostgreSQL makes a subtransaction; a backend caches 64
// of them before every other session's snapshots get slower.
const maxAllocBatch = 64

// allocBatcher queues the ledger's allocations by batch key (allocBatchKey).
type allocBatcher struct {
	// off runs every allocation in a transaction of its own, as before
	// group commit; tests and benchmarks set it to compare the two paths.
	off bool
	mu  sync.Mutex
	// queues holds each key's requests not yet taken; a key is present
	// while a transaction of it is under way (a lone caller's, or a
	// serving goroutine's).
	queues map[string][]*allocReq
	// txs counts committed allocation transactions, so that tests can
	// tell how many requests shared one.
	txs atomic.Int64
}

// allocReq is one caller's request and, once done is closed, its answer.
type allocReq struct {
	ctx  context.Context
	in   AllocateInput
	res  AllocateResult
	err  error
	done chan struct{}
}

func (r *allocReq) answer(res AllocateResult, err error) {
	r.res, r.err = res, err
	close(r.done)
}

// allocBatchKey: on PostgreSQL each pipeline has its own queue and
// transaction, so pipelines never wait for each other's locks (invariant 5);
// SQLite has one writer, so every pipeline shares one queue.
func (l *Ledger) allocBatchKey(pipeline string) string {
	if l.d.lockPipeline == "" {
		return ""
	}
	return pipeline
}

// allocateBatched runs in at once if no transaction of its batch key is
// under way, in the caller's goroutine and with the caller's ctx, exactly
// as an unbatched call; otherwise it queues in for the next transaction and
// waits for its answer or for ctx.
func (l *Ledger) allocateBatched(ctx context.Context, in AllocateInput) (AllocateResult, error) {
	key := l.allocBatchKey(in.Pipeline)
	b := l.alloc
	b.mu.Lock()
	if b.queues == nil {
		b.queues = map[string][]*allocReq{}
	}
	q, served := b.queues[key]
	if !served {
		b.queues[key] = nil // served, by this caller
		b.mu.Unlock()
		res, err := l.allocateAlone(ctx, in)
		l.serveAllocations(key, true)
		return res, err
	}
	r := &allocReq{ctx: ctx, in: in, done: make(chan struct{})}
	b.queues[key] = append(q, r)
	b.mu.Unlock()
	select {
	case <-r.done:
		return r.res, r.err
	case <-ctx.Done():
		select {
		case <-r.done: // answered meanwhile: the answer is the better reply
			return r.res, r.err
		default:
		}
		return AllocateResult{}, fmt.Errorf("ledger %s: allocation of key %q in pipeline %q: %w", l.where, in.Key, in.Pipeline, ctx.Err())
	}
}

// serveAllocations runs key's queued requests, a batch at a time, until the
// queue is empty, and then stops serving key. A caller that has run its own
// request (handOff) does not wait for the others: a goroutine serves them.
func (l *Ledger) serveAllocations(key string, handOff bool) {
	b := l.alloc
	for {
		b.mu.Lock()
		q := b.queues[key]
		if len(q) == 0 {
			delete(b.queues, key)
			b.mu.Unlock()
			return
		}
		if handOff {
			b.mu.Unlock()
			go l.serveAllocations(key, false)
			return
		}
		n := min(len(q), maxAllocBatch)
		batch := q[:n:n]
		if n == len(q) {
			b.queues[key] = nil
		} else {
			b.queues[key] = q[n:]
		}
		b.mu.Unlock()
		l.runAllocBatch(batch)
	}
}

// Savepoint statements, run without arguments: on PostgreSQL (pgx's simple
// protocol) and SQLite alike one call runs both statements.
const (
	allocSavepoint     = `SAVEPOINT alloc`
	allocNextSavepoint = `RELEASE SAVEPOINT alloc; SAVEPOINT alloc`
	allocRollbackTo    = `ROLLBACK TO SAVEPOINT alloc`
)

// errAllocNeedsSavepoints: a request of a batch run without savepoints
// failed in a way that may have written or broken the transaction.
var errAllocNeedsSavepoints = errors.New("an allocation of the batch failed: run the batch with savepoints")

// allocAnswer is one request's answer inside runAllocBatch.
type allocAnswer struct {
	res AllocateResult
	err error
}

// runAllocBatch runs the requests of one batch key in one transaction under
// the pipeline's lock and answers each. It runs them first without
// savepoints, a statement less per request: a request refused for a key
// bound elsewhere (ErrKeyCrossesPeriod, ErrKeyAmbiguous) has written
// nothing and failed no statement. If one fails otherwise, the transaction
// is rolled back and the batch runs again with a savepoint per request, so
// that a failed request takes back only its own writes. If the transaction
// fails (begin, lock, savepoint or commit) every request fails with that
// error.
func (l *Ledger) runAllocBatch(batch []*allocReq) {
	// A caller that has left has its answer (ctx's error): its request is
	// not run, so it writes nothing.
	live := batch[:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.answer(AllocateResult{}, err)
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	ctx, release := batchContext(live)
	defer release()

	st, err := l.allocStatements(ctx)
	if err != nil {
		for _, r := range live {
			r.answer(AllocateResult{}, err)
		}
		return
	}
	answers := make([]allocAnswer, len(live))
	err = l.writeTx(ctx, func(tx *sql.Tx) error {
		return l.allocateAll(ctx, tx, st, live, answers, false)
	})
	if errors.Is(err, errAllocNeedsSavepoints) {
		clear(answers)
		err = l.writeTx(ctx, func(tx *sql.Tx) error {
			return l.allocateAll(ctx, tx, st, live, answers, true)
		})
	}
	if err == nil {
		l.alloc.txs.Add(1)
	}
	for i, r := range live {
		if err != nil {
			r.answer(AllocateResult{}, err)
			continue
		}
		r.answer(answers[i].res, answers[i].err)
	}
}

// allocateAll runs reqs in tx in order, each answer in answers. Without
// savepoints it stops at the first request that fails other than by a
// refused key (errAllocNeedsSavepoints); with them, it rolls back only that
// request's writes and goes on (and on PostgreSQL, after an SQL error, so
// does the transaction).
func (l *Ledger) allocateAll(ctx context.Context, tx *sql.Tx, st *allocStmts, reqs []*allocReq, answers []allocAnswer, savepoints bool) error {
	// One batch key on PostgreSQL is one pipeline, so one lock.
	if err := l.lockAllocation(ctx, tx, st, reqs[0].in.Pipeline); err != nil {
		return err
	}
	if len(reqs) == 1 {
		// Alone: its failure is the transaction's, as without batching.
		answers[0].res, answers[0].err = l.allocateTx(ctx, tx, st, reqs[0].in)
		return answers[0].err
	}
	for i, r := range reqs {
		if savepoints {
			sp := allocNextSavepoint
			if i == 0 {
				sp = allocSavepoint
			}
			if _, err := tx.ExecContext(ctx, sp); err != nil {
				return fmt.Errorf("ledger %s: allocation savepoint: %w", l.where, err)
			}
		}
		res, err := l.allocateTx(ctx, tx, st, r.in)
		answers[i] = allocAnswer{res, err}
		switch {
		case err == nil, errors.Is(err, ErrKeyCrossesPeriod), errors.Is(err, ErrKeyAmbiguous):
		case !savepoints:
			return errAllocNeedsSavepoints
		default:
			if _, rerr := tx.ExecContext(ctx, allocRollbackTo); rerr != nil {
				return fmt.Errorf("ledger %s: roll back the allocation of key %q after %v: %w", l.where, r.in.Key, err, rerr)
			}
		}
	}
	return nil
}

// batchContext is the context of a batch's transaction: it ends when every
// caller in the batch has left, and not before, so that one caller's
// cancellation does not fail the others. A lone caller's is its own.
func batchContext(reqs []*allocReq) (context.Context, func()) {
	if len(reqs) == 1 {
		return reqs[0].ctx, func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var left atomic.Int64
	left.Store(int64(len(reqs)))
	stops := make([]func() bool, len(reqs))
	for i, r := range reqs {
		stops[i] = context.AfterFunc(r.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}
