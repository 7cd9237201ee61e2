package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"allot/app"
	"allot/internal/console"
)

// consoleCommand serves the operator page (docs/design.md, "The operator
// page") until interrupted: read-only, on a loopback address, reading the
// ledger read-only and Temporal as the other commands reach it.
func consoleCommand(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("console", true)
	var addr, webUI string
	fs.StringVar(&addr, "addr", console.DefaultAddr, "loopback host:port to serve the page on (read-only: no other address until operator tokens exist)")
	fs.StringVar(&webUI, "web-ui", "", "base URL of the Temporal Web UI, for the links to workflows (e.g. http://127.0.0.1:8233)")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	// Refused before anything is opened or dialled.
	if err := console.CheckAddr(addr); err != nil {
		return usageError{err}
	}
	if u, err := url.Parse(webUI); webUI != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil) {
		return usageError{fmt.Errorf("--web-ui %q is not an http(s) URL without a user: give the Web UI's base, e.g. --web-ui http://127.0.0.1:8233", app.RedactURL(webUI))}
	}
	set, err := c.pipelines()
	if err != nil {
		return err
	}
	led, err := c.openLedgerReadOnly(ctx)
	if err != nil {
		return err
	}
	defer led.Close()
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	logger := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return console.Serve(ctx, console.ServerConfig{
		Addr:   addr,
		Logger: logger,
		Read: console.ReadInput{Ledger: led, Pipelines: set, Temporal: cl, Namespace: c.resolvedNamespace,
			WebUI: strings.TrimSuffix(webUI, "/")},
		Ready: func(at string) {
			fmt.Fprintf(c.stdout, "operator page: http://%s/ (ledger %s, read-only; Ctrl-C stops it)\n", at, app.RedactURL(c.cfg.Ledger))
		},
	})
}
