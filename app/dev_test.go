package app_test

import (
	"allot"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"allot/app"
	"allot/ledger"
	"allot/operator"
	"allot/pipeline"
	"allot/workflows"
)

// startDev runs the one-command setup in-process on free ports and returns
// where it is and a stop function that waits for a clean exit.
func startDev(t *testing.T, dir string) (app.DevInfo, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan app.DevInfo, 1)
	done := make(chan error, 1)
	go func() {
		done <- app.RunDev(ctx, app.DevConfig{
			DataDir: dir, Port: -1, UIPort: -1, VendorPort: -1,
			Ready: func(info app.DevInfo) { ready <- info },
		})
	}()
	select {
	case info := <-ready:
		return info, func() {
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("RunDev after stop: %v", err)
			}
		}
	case err := <-done:
		t.Fatalf("RunDev: %v", err)
	case <-time.After(3 * time.Minute):
		t.Fatal("RunDev did not become ready")
	}
	return app.DevInfo{}, nil
}

func vendorCharges(t *testing.T, dir string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "vendorsim.json"))
	if err != nil {
		t.Fatal(err)
	}
	var state struct {
		Charges []json.RawMessage `json:"charges"`
	}
	if err := json.Unmarshal(data, &state); err != nil {
		t.Fatal(err)
	}
	return len(state.Charges)
}

// runDemoEpisode runs weekly-video once for nominal, approves it, and waits
// for it to complete.
func runDemoEpisode(t *testing.T, info app.DevInfo, nominal time.Time) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: info.Frontend, Namespace: info.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	set, err := pipeline.Load("")
	if err != nil {
		t.Fatal(err)
	}
	runs := &operator.Runs{Client: c, Pipelines: set, TaskQueue: workflows.TaskQueue}
	res, err := runs.Run(ctx, operator.RunInput{Pipeline: "weekly-video", NominalTime: nominal, Wait: true})
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
		_, err := cmds.Send(ctx, operator.CommandInput{Pipeline: "weekly-video", EpisodeID: res.Result.EpisodeID, Update: workflows.ApproveUpdate})
		if err == nil {
			break
		}
		if appErrType(err) != allot.NotReady || ctx.Err() != nil {
			t.Fatalf("approve: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var final workflows.EpisodeResult
	if err := c.GetWorkflow(ctx, workflows.EpisodeWorkflowID("weekly-video", res.Result.EpisodeID), "").Get(ctx, &final); err != nil {
		t.Fatal(err)
	}
	if final.Stage != allot.StageCompleted {
		t.Fatalf("demo episode ended %+v", final)
	}
	return res.Result.EpisodeID
}

func TestDevSetupRunsDemoAndResumesAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the embedded server twice")
	}
	dir := t.TempDir()
	info, stop := startDev(t, dir)
	if info.WebUI == "" || info.VendorURL == "" {
		t.Fatalf("dev info %+v", info)
	}
	first := runDemoEpisode(t, info, time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC))
	stop()
	if n := vendorCharges(t, dir); n != 2 {
		t.Fatalf("after the first episode the vendor has %d charges, want 2", n)
	}

	info, stop = startDev(t, dir)
	defer stop()
	// The same run again reports the existing episode; a new one continues the sequence.
	second := runDemoEpisode(t, info, time.Date(2026, 8, 4, 2, 0, 0, 0, time.UTC))
	if first != "2026-W32-0" || second != "2026-W32-1" {
		t.Fatalf("episodes %s, %s; want 2026-W32-0 then 2026-W32-1", first, second)
	}
	if n := vendorCharges(t, dir); n != 4 {
		t.Fatalf("after the restart and a second episode the vendor has %d charges, want 4 (nothing re-paid)", n)
	}
}
