package activities

import (
	"context"
	"io"
	"time"

	"go.temporal.io/sdk/activity"
)

// heartbeatEvery is how often a waiting activity heartbeats. The workflows
// give such activities a 10 s heartbeat timeout (2 s for a vendor with a
// short send_timeout), so a killed worker's attempt is retried within
// seconds, not after its start-to-close timeout. The SDK sends at most one
// heartbeat per 80% of the timeout, so beating often costs nothing.
const heartbeatEvery = 500 * time.Millisecond

// withHeartbeat runs call (typically one vendor request) while heartbeating,
// so that the attempt stays alive while the call waits and a killed worker
// is noticed by the heartbeat timeout. Outside an activity (unit tests of
// helpers) it just calls.
func withHeartbeat[T any](ctx context.Context, call func(context.Context) (T, error)) (T, error) {
	defer heartbeating(ctx)()
	return call(ctx)
}

// heartbeating heartbeats until the returned stop is called: around one
// call (withHeartbeat) or a whole activity whose every part may wait (the
// batch activities: the ledger, the vendor's list, a create, results to
// read and settle), so that a
// killed worker's attempt is retried within the heartbeat timeout, not
// after the start-to-close timeout. Outside an activity it does nothing.
func heartbeating(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(heartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx, "running")
			}
		}
	}()
	return func() { close(done) }
}

// progressReader reports the number of bytes read so far to beat, at most
// once per every, while a result downloads.
type progressReader struct {
	r     io.Reader
	every time.Duration
	beat  func(n int64)
	n     int64
	last  time.Time
}

// heartbeatProgress reads r, heartbeating the bytes read so far.
func heartbeatProgress(ctx context.Context, r io.Reader) io.Reader {
	if !activity.IsActivity(ctx) {
		return r
	}
	return &progressReader{r: r, every: heartbeatEvery, beat: func(n int64) { activity.RecordHeartbeat(ctx, n) }}
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n += int64(n)
	if now := time.Now(); n > 0 && now.Sub(p.last) >= p.every {
		p.last = now
		p.beat(p.n)
	}
	return n, err
}
