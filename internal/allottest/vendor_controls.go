package allottest

import (
	"context"
	"path/filepath"

	"allot/app"
	"allot/internal/ledger"
	"allot/workflows"
)

// PipelinesWithDefaultVendor is the test pipelines with a [[vendor]] named
// "default" that gives the default vendor (the cluster's simulator) the
// controls in settings, TOML lines such as "max_in_flight = 1".
func PipelinesWithDefaultVendor(settings string) []byte {
	return []byte("[[vendor]]\nname = \"default\"\n" + settings + "\n\n" + string(pipelinesTOML))
}

// AddWorkers starts n more workers on the cluster's task queue, each with
// its own ledger connections, as other processes on the same ledger would:
// what they share (the vendor's pause, breaker, slots and tokens) goes
// through the ledger. They stop when the test ends.
func (c *Cluster) AddWorkers(n int) {
	c.t.Helper()
	for range n {
		led, err := ledger.Open(context.Background(), c.LedgerURL)
		if err != nil {
			c.t.Fatal(err)
		}
		acts := *c.Activities
		acts.Ledger = led
		acts.ArtifactsDir = filepath.Join(c.Dir, "artifacts")
		wctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- app.Serve(wctx, c.Client, workflows.TaskQueue, &acts) }()
		c.t.Cleanup(func() {
			stop()
			if err := <-done; err != nil {
				c.t.Error(err)
			}
			led.Close()
		})
	}
}
