package devstack_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"allot"
	"allot/internal/allottest"
	"allot/internal/devstack"
	"allot/internal/operator"
	"allot/pipeline"
	"allot/workflows"
)

func devSchedules(t *testing.T, info devstack.Info) *operator.Schedules {
	t.Helper()
	set, err := pipeline.Load("")
	if err != nil {
		t.Fatal(err)
	}
	return &operator.Schedules{Client: allottest.DialDev(t, info), Pipelines: set, TaskQueue: workflows.TaskQueue, Namespace: info.Namespace}
}

// The demo schedule is created the first time the dev setup runs on a data
// directory, and never again: it used to be restored on every start,
// undoing the operator's update and re-creating a deleted schedule.
func TestDemoScheduleIsCreatedOncePerDataDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the embedded server three times")
	}
	ctx, cancel := allottest.Context(t, 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cfg := devstack.Config{DataDir: dir, DemoInterval: time.Hour}

	dev := allottest.StartDevWith(t, cfg)
	if dev.Info.Schedule != allot.ScheduleID(devstack.DemoPipeline) || !dev.Info.ScheduleCreated {
		t.Fatalf("first start: %+v, want the demo schedule created", dev.Info)
	}
	if _, err := os.Stat(filepath.Join(dir, devstack.DemoScheduleMarker(devstack.DemoPipeline))); err != nil {
		t.Fatalf("no marker of the creation: %v", err)
	}
	if _, err := devSchedules(t, dev.Info).Update(ctx, operator.ScheduleInput{Pipeline: devstack.DemoPipeline, Override: pipeline.Schedule{Interval: "2h"}}); err != nil {
		t.Fatal(err)
	}
	dev.Stop()

	dev = allottest.StartDevWith(t, cfg)
	if dev.Info.Schedule == "" || dev.Info.ScheduleCreated {
		t.Fatalf("second start: %+v, want the existing schedule reported, not created", dev.Info)
	}
	s := devSchedules(t, dev.Info)
	d, err := s.Describe(ctx, devstack.DemoPipeline)
	if err != nil || d.Spec.Interval != 2*time.Hour {
		t.Fatalf("after a restart the schedule is %+v, %v; want the operator's 2h kept", d.Spec, err)
	}
	if err := s.Delete(ctx, devstack.DemoPipeline); err != nil {
		t.Fatal(err)
	}
	dev.Stop()

	dev = allottest.StartDevWith(t, cfg)
	if dev.Info.Schedule != "" || dev.Info.ScheduleCreated {
		t.Fatalf("third start: %+v, want no schedule", dev.Info)
	}
	if _, err := devSchedules(t, dev.Info).Describe(ctx, devstack.DemoPipeline); err == nil {
		t.Fatal("the deleted demo schedule was created again")
	}
	dev.Stop()
}

// --no-worker runs the server and its Web UI only: nothing polls the task
// queue, and there is no vendor, ledger or demo schedule.
func TestNoWorkerRunsTheServerOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the embedded server")
	}
	ctx, cancel := allottest.Context(t, 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	dev := allottest.StartDevWith(t, devstack.Config{DataDir: dir, NoWorker: true, DemoInterval: time.Hour})
	if dev.Info.Frontend == "" || dev.Info.WebUI == "" || dev.Info.VendorURL != "" || dev.Info.Ledger != "" || dev.Info.Schedule != "" {
		t.Fatalf("--no-worker info %+v, want the server and UI only", dev.Info)
	}
	c := allottest.DialDev(t, dev.Info)
	time.Sleep(2 * time.Second) // a worker would be polling by now
	for _, tq := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
		resp, err := c.DescribeTaskQueue(ctx, workflows.TaskQueue, tq)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(resp.GetPollers()); n != 0 {
			t.Fatalf("%d pollers on task queue %s (%s): a hidden worker competes for the user's tasks", n, workflows.TaskQueue, tq)
		}
	}
	iter, err := c.ScheduleClient().List(ctx, client.ScheduleListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if iter.HasNext() {
		t.Fatal("--no-worker created a schedule")
	}
	for _, name := range []string{"allot.db", devstack.VendorStateFile, devstack.DemoScheduleMarker(devstack.DemoPipeline)} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("--no-worker left %s in the data directory (%v)", name, err)
		}
	}
	dev.Stop()
}
