package temporalserver

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/common/log/tag"
)

var (
	pipelineKey = temporal.NewSearchAttributeKeyKeyword("AllotPipeline")
	sequenceKey = temporal.NewSearchAttributeKeyInt64("AllotSequence")
	episodeKey  = temporal.NewSearchAttributeKeyKeyword("AllotEpisode")

	testAttrs = map[string]enumspb.IndexedValueType{
		"AllotPipeline": enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		"AllotSequence": enumspb.INDEXED_VALUE_TYPE_INT,
	}
)

const taskQueue = "temporalserver-test"

// testLogger sends server warnings to the test log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func start(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Logf("server up in %v: frontend %s, UI %q", time.Since(began).Round(time.Millisecond), s.FrontendAddress(), s.UIAddress())
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return s
}

func dial(t *testing.T, s *Server) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{
		HostPort:  s.FrontendAddress(),
		Namespace: s.Namespace(),
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		t.Fatalf("client.Dial(%s): %v", s.FrontendAddress(), err)
	}
	t.Cleanup(c.Close)
	return c
}

// UpsertWorkflow sets the test search attributes on itself.
func UpsertWorkflow(ctx workflow.Context, pipeline string, seq int64) error {
	return workflow.UpsertTypedSearchAttributes(ctx, pipelineKey.ValueSet(pipeline), sequenceKey.ValueSet(seq))
}

// CounterWorkflow counts "bump" updates until a "done" signal.
func CounterWorkflow(ctx workflow.Context) (int, error) {
	n := 0
	if err := workflow.SetUpdateHandler(ctx, "bump", func(ctx workflow.Context, by int) (int, error) {
		n += by
		return n, nil
	}); err != nil {
		return 0, err
	}
	workflow.GetSignalChannel(ctx, "done").Receive(ctx, nil)
	return n, nil
}

func startWorker(t *testing.T, c client.Client) {
	t.Helper()
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflow(UpsertWorkflow)
	w.RegisterWorkflow(CounterWorkflow)
	if err := w.Start(); err != nil {
		t.Fatalf("worker start: %v", err)
	}
	t.Cleanup(w.Stop)
}

// waitList polls a visibility query until it returns the workflow ID.
func waitList(t *testing.T, c client.Client, query, wantID string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		cancel()
		if err != nil {
			last = err.Error()
		} else {
			var ids []string
			for _, e := range resp.GetExecutions() {
				if e.GetExecution().GetWorkflowId() == wantID {
					return
				}
				ids = append(ids, e.GetExecution().GetWorkflowId())
			}
			last = fmt.Sprintf("got %v", ids)
		}
		if time.Now().After(deadline) {
			t.Fatalf("query %q did not return %s within %v (last: %s)", query, wantID, timeout, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func TestInMemoryServer(t *testing.T) {
	s := start(t, Config{Port: FreePort, UIPort: FreePort, SearchAttributes: testAttrs})
	if s.Namespace() != DefaultNamespace {
		t.Errorf("Namespace() = %q, want %q", s.Namespace(), DefaultNamespace)
	}
	if !strings.HasPrefix(s.UIAddress(), "http://127.0.0.1:") {
		t.Errorf("UIAddress() = %q", s.UIAddress())
	}
	c := dial(t, s)
	startWorker(t, c)

	t.Run("upserted search attributes are queryable", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "upsert-1", TaskQueue: taskQueue}, UpsertWorkflow, "x", int64(7))
		if err != nil {
			t.Fatal(err)
		}
		if err := run.Get(ctx, nil); err != nil {
			t.Fatalf("workflow: %v", err)
		}
		waitList(t, c, `AllotPipeline = "x"`, "upsert-1", 30*time.Second)
		waitList(t, c, `AllotPipeline = "x" AND AllotSequence = 7`, "upsert-1", 30*time.Second)
	})

	t.Run("update with start", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		uws := func(by int) int {
			op := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
				ID:                       "counter-1",
				TaskQueue:                taskQueue,
				WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			}, CounterWorkflow)
			h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
				StartWorkflowOperation: op,
				UpdateOptions: client.UpdateWorkflowOptions{
					UpdateName:   "bump",
					Args:         []any{by},
					WaitForStage: client.WorkflowUpdateStageCompleted,
				},
			})
			if err != nil {
				t.Fatalf("UpdateWithStartWorkflow: %v", err)
			}
			var n int
			if err := h.Get(ctx, &n); err != nil {
				t.Fatalf("update result: %v", err)
			}
			return n
		}
		if n := uws(2); n != 2 {
			t.Errorf("first update-with-start = %d, want 2", n)
		}
		if n := uws(3); n != 5 {
			t.Errorf("second update-with-start = %d, want 5 (same run)", n)
		}
		if err := c.SignalWorkflow(ctx, "counter-1", "", "done", nil); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := c.GetWorkflow(ctx, "counter-1", "").Get(ctx, &n); err != nil || n != 5 {
			t.Fatalf("counter result = %d, %v; want 5", n, err)
		}
	})

	t.Run("schedule starts a workflow with search attributes", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		h, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
			ID:                 "sched-1",
			Spec:               client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: time.Hour}}},
			TriggerImmediately: true,
			Action: &client.ScheduleWorkflowAction{
				ID:                    "sched-1-run",
				Workflow:              UpsertWorkflow,
				Args:                  []any{"sched", int64(1)},
				TaskQueue:             taskQueue,
				TypedSearchAttributes: temporal.NewSearchAttributes(pipelineKey.ValueSet("sched")),
			},
		})
		if err != nil {
			t.Fatalf("create schedule: %v", err)
		}
		defer func() { _ = h.Delete(context.Background()) }()
		deadline := time.Now().Add(time.Minute)
		var id string
		for id == "" {
			desc, err := h.Describe(ctx)
			if err == nil && len(desc.Info.RecentActions) > 0 {
				id = desc.Info.RecentActions[0].StartWorkflowResult.WorkflowID
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("schedule took no action within a minute (describe error: %v)", err)
			}
			time.Sleep(250 * time.Millisecond)
		}
		if !strings.HasPrefix(id, "sched-1-run-") {
			t.Errorf("scheduled workflow ID = %q, want sched-1-run-<time>", id)
		}
		waitList(t, c, `AllotPipeline = "sched" AND TemporalScheduledById = "sched-1"`, id, 30*time.Second)
	})

	t.Run("web ui", func(t *testing.T) {
		get := func(path string) (*http.Response, string) {
			t.Helper()
			resp, err := http.Get(s.UIAddress() + path)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			defer func() { _ = resp.Body.Close() }()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %s: %.300s", path, resp.Status, body)
			}
			return resp, string(body)
		}

		resp, body := get("/")
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("GET /: Content-Type %q", ct)
		}
		if !strings.Contains(strings.ToLower(body), "<html") {
			t.Errorf("GET /: no HTML in %.200q", body)
		}

		// The UI's API goes through the ui-server to the frontend.
		_, body = get("/api/v1/namespaces")
		var list struct {
			Namespaces []struct {
				NamespaceInfo struct{ Name string } `json:"namespaceInfo"`
			} `json:"namespaces"`
		}
		if err := json.Unmarshal([]byte(body), &list); err != nil {
			t.Fatalf("/api/v1/namespaces: %v in %.300s", err, body)
		}
		found := false
		for _, ns := range list.Namespaces {
			found = found || ns.NamespaceInfo.Name == s.Namespace()
		}
		if !found {
			t.Errorf("/api/v1/namespaces does not list %q: %.300s", s.Namespace(), body)
		}

		_, body = get("/api/v1/namespaces/" + s.Namespace() + "/search-attributes")
		for name := range testAttrs {
			if !strings.Contains(body, name) {
				t.Errorf("search attributes through the UI lack %s: %.300s", name, body)
			}
		}

		// A write action through the UI: the CSRF token cookie from a page
		// load must come back as the X-CSRF-Token header.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "ui-terminate", TaskQueue: "nobody-polls"}, "Idle"); err != nil {
			t.Fatal(err)
		}
		var csrf string
		for _, ck := range resp.Cookies() {
			if ck.Name == "_csrf" {
				csrf = ck.Value
			}
		}
		if csrf == "" {
			t.Fatalf("GET / set no _csrf cookie: %v", resp.Header.Values("Set-Cookie"))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost,
			s.UIAddress()+"/api/v1/namespaces/"+s.Namespace()+"/workflows/ui-terminate/terminate",
			strings.NewReader(`{"reason":"from the UI test"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-CSRF-Token", csrf)
		req.AddCookie(&http.Cookie{Name: "_csrf", Value: csrf})
		tresp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		tbody, _ := io.ReadAll(tresp.Body)
		_ = tresp.Body.Close()
		if tresp.StatusCode != http.StatusOK {
			t.Fatalf("terminate through the UI: %s: %s", tresp.Status, tbody)
		}
		desc, err := c.DescribeWorkflowExecution(ctx, "ui-terminate", "")
		if err != nil {
			t.Fatal(err)
		}
		if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED {
			t.Errorf("status after terminate through the UI = %v", st)
		}

		_, body = get("/api/v1/settings")
		if !strings.Contains(body, `"DefaultNamespace":"default"`) && !strings.Contains(body, `"defaultNamespace":"default"`) {
			t.Errorf("/api/v1/settings has no default namespace: %.300s", body)
		}
	})
}

func TestDataDirPersistence(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cfg := Config{DataDir: dir, Port: FreePort, DisableUI: true, SearchAttributes: testAttrs, Logger: testLogger(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	s1, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("first Start: %v", err)
	}
	if s1.UIAddress() != "" {
		t.Errorf("UIAddress() = %q with DisableUI", s1.UIAddress())
	}
	if _, err := Start(ctx, cfg); err == nil || !strings.Contains(err.Error(), "already used") {
		t.Errorf("second concurrent Start on the same DataDir: err = %v, want 'already used'", err)
	}
	c1 := dial(t, s1)
	// No worker: the workflow stays running with its first task pending.
	run, err := c1.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                    "persist-1",
		TaskQueue:             taskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(pipelineKey.ValueSet("p")),
	}, "NoSuchWorkflow")
	if err != nil {
		t.Fatal(err)
	}
	c1.Close()
	if err := s1.Stop(); err != nil {
		t.Fatalf("first Stop: %v", err)
	}
	if err := s1.Stop(); err != nil {
		t.Fatalf("second Stop (idempotent): %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, DBFileName)); err != nil || fi.Size() == 0 {
		t.Fatalf("data file after Stop: %v", err)
	}

	// Restart on the same file, adding one more attribute: the existing
	// ones are found, the new one goes through the operator service.
	cfg.SearchAttributes = map[string]enumspb.IndexedValueType{
		"AllotPipeline": enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		"AllotSequence": enumspb.INDEXED_VALUE_TYPE_INT,
		"AllotEpisode":  enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	}
	s2 := start(t, cfg)
	c2 := dial(t, s2)
	desc, err := c2.DescribeWorkflowExecution(ctx, "persist-1", "")
	if err != nil {
		t.Fatalf("workflow lost across restart: %v", err)
	}
	if got := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(); got != run.GetRunID() {
		t.Errorf("run ID after restart = %s, want %s", got, run.GetRunID())
	}
	waitList(t, c2, `AllotPipeline = "p"`, "persist-1", 30*time.Second)

	// Right after a quick restart every service takes work: a workflow
	// runs to completion promptly (stale membership from the first run
	// used to keep matching out of the ring for ~10 s).
	startWorker(t, c2)
	quick, cancelQuick := context.WithTimeout(ctx, 8*time.Second)
	r, err := c2.ExecuteWorkflow(quick, client.StartWorkflowOptions{ID: "after-restart", TaskQueue: taskQueue}, UpsertWorkflow, "r", int64(1))
	if err == nil {
		err = r.Get(quick, nil)
	}
	cancelQuick()
	if err != nil {
		t.Fatalf("workflow right after restart: %v", err)
	}

	sas, err := c2.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s2.Namespace()})
	if err != nil {
		t.Fatal(err)
	}
	for name, typ := range cfg.SearchAttributes {
		if got := sas.GetCustomAttributes()[name]; got != typ {
			t.Errorf("search attribute %s = %v, want %v", name, got, typ)
		}
	}
	// The attribute added on restart is usable at once.
	if _, err := c2.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                    "persist-2",
		TaskQueue:             taskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(episodeKey.ValueSet("2026-W32-0")),
	}, "NoSuchWorkflow"); err != nil {
		t.Fatalf("start with the new attribute: %v", err)
	}
	waitList(t, c2, `AllotEpisode = "2026-W32-0"`, "persist-2", 30*time.Second)

	// A type conflict with what is registered is reported, not ignored.
	if err := s2.Stop(); err != nil {
		t.Fatal(err)
	}
	bad := cfg
	bad.SearchAttributes = map[string]enumspb.IndexedValueType{"AllotSequence": enumspb.INDEXED_VALUE_TYPE_KEYWORD}
	if s3, err := Start(ctx, bad); err == nil {
		_ = s3.Stop()
		t.Fatal("Start with a conflicting search attribute type succeeded")
	} else if !strings.Contains(err.Error(), "AllotSequence") {
		t.Errorf("conflict error does not name the attribute: %v", err)
	}
}

func TestPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	busy := l.Addr().(*net.TCPAddr).Port

	for _, cfg := range []Config{
		{Port: busy, DisableUI: true},
		{Port: FreePort, UIPort: busy},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		began := time.Now()
		s, err := Start(ctx, cfg)
		cancel()
		if err == nil {
			_ = s.Stop()
			t.Fatalf("Start(%+v) on a busy port succeeded", cfg)
		}
		if !strings.Contains(err.Error(), strconv.Itoa(busy)) || !strings.Contains(err.Error(), "not available") {
			t.Errorf("error does not say which port is busy: %v", err)
		}
		if d := time.Since(began); d > 5*time.Second {
			t.Errorf("failing took %v", d)
		}
		t.Logf("got: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []Config{
		{Host: "not a host", DisableUI: true},
		{Port: -2},
		{Port: 70000},
		{Port: FreePort, UIPort: -5},
		{Port: 7555, UIPort: 7555},
		{Port: FreePort, DisableUI: true, SearchAttributes: map[string]enumspb.IndexedValueType{"WorkflowId": enumspb.INDEXED_VALUE_TYPE_KEYWORD}},
		{Port: FreePort, DisableUI: true, SearchAttributes: map[string]enumspb.IndexedValueType{"X": enumspb.INDEXED_VALUE_TYPE_UNSPECIFIED}},
		{Port: FreePort, DisableUI: true, DataDir: filepath.Join(t.TempDir(), "a?b")},
	} {
		if s, err := Start(ctx, cfg); err == nil {
			_ = s.Stop()
			t.Errorf("Start(%+v) succeeded", cfg)
		}
	}
}

func TestRun(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Config{Port: port, DisableUI: true, Logger: testLogger(t)}) }()

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		c, err := client.Dial(client.Options{HostPort: addr, Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
		if err == nil {
			_, err = c.WorkflowService().DescribeNamespace(context.Background(), &workflowservice.DescribeNamespaceRequest{Namespace: DefaultNamespace})
			c.Close()
			if err == nil {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned early: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server from Run not reachable at %s: %v", addr, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after cancel")
	}
	// The server is gone: its port is free again.
	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("port still busy after Run returned: %v", err)
	}
	_ = l.Close()
}

func TestLoggerAdapter(t *testing.T) {
	var buf strings.Builder
	l := newSlogLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	l.started(false)
	l.Info("chatty")
	l.Debug("chattier")
	l.With(tag.NewStringTag("k", "v")).Warn("careful", tag.NewStringTag("x", "y"))
	out := buf.String()
	if strings.Contains(out, "chatty") {
		t.Errorf("info/debug passed the warn filter: %s", out)
	}
	if !strings.Contains(out, "careful") || !strings.Contains(out, "k=v") || !strings.Contains(out, "x=y") {
		t.Errorf("warn record incomplete: %s", out)
	}
	err := recoverFatal(func() error {
		l.Fatal("cannot listen", tag.Error(errors.New("address already in use")))
		return nil
	})
	var fe *fatalError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("Fatal gave %v, want a *fatalError with the cause", err)
	}
	newSlogLogger(nil).Error("discarded") // nil logger discards

	// A write the caller cancelled (a worker's stop cuts its heartbeat
	// calls short) is a WARN; any other error stays an ERROR.
	for _, c := range []struct {
		err  error
		want string
	}{
		{context.Canceled, "level=WARN"},
		{fmt.Errorf("update-wf-execution: %w", context.Canceled), "level=WARN"},
		{errors.New("context canceled"), "level=WARN"},
		{errors.New("database is locked"), "level=ERROR"},
	} {
		buf.Reset()
		l.Error("Update workflow execution operation failed.", tag.Error(c.err))
		if !strings.HasPrefix(buf.String(), "time=") || !strings.Contains(buf.String(), c.want) {
			t.Errorf("Error with %q wrote %q, want %s", c.err, buf.String(), c.want)
		}
		buf.Reset()
		l.With(tag.Error(c.err)).Error("Update workflow execution operation failed.")
		if !strings.Contains(buf.String(), c.want) {
			t.Errorf("Error of a logger With %q wrote %q, want %s", c.err, buf.String(), c.want)
		}
	}

	buf.Reset()
	l.With(tag.NewStringTag("a", "b")).(*slogLogger).silence()
	l.Error("after stop")
	if buf.Len() != 0 {
		t.Errorf("silenced logger wrote %q", buf.String())
	}

	// Start-up records are held back, then shown only on failure.
	for _, failed := range []bool{false, true} {
		buf.Reset()
		l := newSlogLogger(slog.New(slog.NewTextHandler(&buf, nil)))
		l.Error("frontend is not healthy yet")
		l.Warn("HTTP API port has not been set. Nexus ...") // always dropped
		if buf.Len() != 0 {
			t.Errorf("record written during start-up: %q", buf.String())
		}
		l.started(failed)
		if got := strings.Contains(buf.String(), "not healthy"); got != failed {
			t.Errorf("started(%v): held record written = %v: %q", failed, got, buf.String())
		}
		if strings.Contains(buf.String(), "HTTP API port") {
			t.Errorf("benign message written: %q", buf.String())
		}
		buf.Reset()
		l.Warn("later")
		if !strings.Contains(buf.String(), "later") {
			t.Errorf("record after start-up not written")
		}
	}
}

func TestOpenStore(t *testing.T) {
	// A file that exists but is empty gets the schema.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, DBFileName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := openStore(dir)
	if err != nil {
		t.Fatalf("openStore on an empty file: %v", err)
	}
	if state, err := inspectFile(st.path); err != nil || state != fileReady {
		t.Errorf("after openStore: state %v, %v; want ready", state, err)
	}
	if _, err := openStore(dir); err == nil || !strings.Contains(err.Error(), "already used") {
		t.Errorf("second openStore while in use: %v", err)
	}
	st.release()
	st, err = openStore(dir)
	if err != nil {
		t.Fatalf("openStore after release: %v", err)
	}
	st.release()

	// A database with other tables is refused, not "repaired".
	other := t.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(other, DBFileName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE namespaces (x INT)`); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	if _, err := openStore(other); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Errorf("openStore on a foreign database: %v", err)
	}
}
