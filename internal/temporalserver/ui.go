package temporalserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	"github.com/temporalio/ui-server/v2/server/server_options"
)

// uiServer is the Temporal Web UI (with its HTTP API proxy to the
// frontend), served from the assets built into the ui-server module.
type uiServer struct {
	srv  *uiserver.Server
	done chan struct{}
}

func startUI(ctx context.Context, st *settings) (*uiServer, error) {
	origins := []string{st.uiURL}
	if st.dialHost == "127.0.0.1" {
		origins = append(origins, "http://localhost:"+strconv.Itoa(st.uiPort))
	}
	cfg := &uiconfig.Config{
		// The UI holds no credentials: behind a secured frontend it uses the
		// internal one (this server is for tests and one machine).
		TemporalGRPCAddress: cmp.Or(st.internalAddr, st.frontendAddr),
		Host:                st.bindIP,
		Port:                st.uiPort,
		PublicPath:          "", // served at the root
		EnableUI:            true,
		DefaultNamespace:    st.cfg.Namespace,
		CORS: uiconfig.CORS{
			AllowOrigins: origins,
			// Plain HTTP: the CSRF cookie must not be marked Secure, or a
			// browser on a non-localhost host never sends it back and every
			// write action (terminate, signal, update...) fails.
			CookieInsecure: true,
		},
		// The news feed is fetched from the internet; a dev server may be
		// offline.
		DisableNewsFetch: true,
		// No per-request access log on stdout.
		HideLogs: true,
		// RefreshInterval stays 0: with a refresh interval the ui-server
		// starts a goroutine that never ends.
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("temporalserver: Web UI config: %w", err)
	}

	var srv *uiserver.Server
	if err := recoverFatal(func() error {
		srv = uiserver.NewServer(server_options.WithConfigProvider(cfg))
		return nil
	}); err != nil {
		return nil, fmt.Errorf("temporalserver: creating the Web UI: %w", err)
	}
	u := &uiServer{srv: srv, done: make(chan struct{})}
	// Start blocks until Stop. (If it cannot listen it exits the process
	// through echo's Fatal; resolve has checked the port just before.)
	go func() {
		defer close(u.done)
		_ = srv.Start()
	}()

	if err := waitHTTP(ctx, st.uiURL+"/", u.done); err != nil {
		_ = u.stop()
		return nil, fmt.Errorf("temporalserver: Web UI at %s: %w", st.uiURL, err)
	}
	return u, nil
}

// waitHTTP polls url until it answers 200, ctx is done or stopped closes.
func waitHTTP(ctx context.Context, url string, stopped <-chan struct{}) error {
	client := &http.Client{Timeout: 2 * time.Second}
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		last = err
		select {
		case <-stopped:
			return errors.New("server stopped before answering")
		case <-ctx.Done():
			return fmt.Errorf("not answering: %w (last error: %v)", ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}

func (u *uiServer) stop() error {
	u.srv.Stop()
	select {
	case <-u.done:
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("temporalserver: Web UI did not stop within 10s")
	}
}
