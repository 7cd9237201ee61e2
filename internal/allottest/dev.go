package allottest

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"allot"
	"allot/internal/devstack"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/pipeline"
	"allot/workflows"
)

// Dev is the one-command dev stack (devstack.Run) running in the test's
// process on free ports.
type Dev struct {
	// Info says where its pieces are.
	Info devstack.Info

	t      *testing.T
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// StartDev runs the dev stack with its state in dir and waits until it is
// ready (3 minutes at most). It is stopped when the test ends, if Stop was
// not called before.
func StartDev(t *testing.T, dir string) *Dev {
	t.Helper()
	return StartDevWith(t, devstack.Config{DataDir: dir})
}

// StartDevWith is StartDev with more of the dev stack's settings (a demo
// schedule, --no-worker); the ports are always free ones.
func StartDevWith(t *testing.T, cfg devstack.Config) *Dev {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &Dev{t: t, cancel: cancel, done: make(chan error, 1)}
	ready := make(chan devstack.Info, 1)
	cfg.Port, cfg.UIPort, cfg.VendorPort = -1, -1, -1
	cfg.Ready = func(info devstack.Info) { ready <- info }
	go func() {
		d.done <- devstack.Run(ctx, cfg)
	}()
	select {
	case d.Info = <-ready:
		t.Cleanup(func() { d.stop(t.Errorf) })
		return d
	case err := <-d.done:
		cancel()
		t.Fatalf("devstack.Run: %v", err)
	case <-time.After(3 * time.Minute):
		cancel()
		t.Fatal("devstack.Run did not become ready")
	}
	return nil
}

// Stop stops the dev stack and fails the test unless it stopped cleanly.
func (d *Dev) Stop() {
	d.t.Helper()
	d.stop(d.t.Fatalf)
}

func (d *Dev) stop(fail func(string, ...any)) {
	d.once.Do(func() {
		d.cancel()
		if err := <-d.done; err != nil {
			fail("devstack.Run after stop: %v", err)
		}
	})
}

// DialDev connects a client to the dev stack's Temporal; it is closed when
// the test ends.
func DialDev(t *testing.T, info devstack.Info) client.Client {
	t.Helper()
	c := dialDev(t, info)
	t.Cleanup(c.Close)
	return c
}

func dialDev(t *testing.T, info devstack.Info) client.Client {
	t.Helper()
	ctx, cancel := Context(t, time.Minute)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: info.Frontend, Namespace: info.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// RunDemoEpisode runs the demo pipeline once for nominal on the dev stack,
// approves the episode as soon as it waits at the gate, waits for it to
// complete and returns its ID.
func RunDemoEpisode(t *testing.T, info devstack.Info, nominal time.Time) string {
	t.Helper()
	ctx, cancel := Context(t, 2*time.Minute)
	defer cancel()
	c := dialDev(t, info)
	defer c.Close()
	set, err := pipeline.Load("")
	if err != nil {
		t.Fatal(err)
	}
	runs := &operator.Runs{Client: c, Pipelines: set, TaskQueue: workflows.TaskQueue}
	res, err := runs.Run(ctx, operator.RunInput{Pipeline: devstack.DemoPipeline, NominalTime: nominal, Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	led, err := ledger.OpenReadOnly(ctx, info.Ledger)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	cmds := &operator.EpisodeCommands{Client: c, Pipelines: set, TaskQueue: workflows.TaskQueue, Ledger: led}
	for {
		_, err := cmds.Send(ctx, operator.CommandInput{Pipeline: devstack.DemoPipeline, EpisodeID: res.Result.EpisodeID, Update: workflows.ApproveUpdate})
		if err == nil {
			break
		}
		if ErrorType(err) != allot.NotReady || ctx.Err() != nil {
			t.Fatalf("approve: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var final workflows.EpisodeResult
	if err := c.GetWorkflow(ctx, allot.EpisodeWorkflowID(devstack.DemoPipeline, res.Result.EpisodeID), "").Get(ctx, &final); err != nil {
		t.Fatal(err)
	}
	if final.Stage != allot.StageCompleted {
		t.Fatalf("demo episode ended %+v", final)
	}
	return res.Result.EpisodeID
}

// DevVendorCharges reads the charges the dev stack's simulated vendor keeps
// under dataDir, through the simulator's own loader (so a state file that
// does not load fails the test). The simulator replaces the file atomically,
// so it may be read while the stack runs.
func DevVendorCharges(t *testing.T, dataDir string) []paidvendor.Charge {
	t.Helper()
	sim, err := paidvendortest.OpenSimulator(paidvendortest.SimConfig{
		APIKey: paidvendortest.DevAPIKey, StateFile: filepath.Join(dataDir, devstack.VendorStateFile),
	})
	if err != nil {
		t.Fatal(err)
	}
	return sim.Charges()
}
