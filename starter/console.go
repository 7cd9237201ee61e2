package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"allot"
	"allot/app"
	"allot/internal/console"
	"allot/internal/operator"
)

// consoleCommand serves the operator page (docs/design.md, "The operator
// page") until interrupted. Without a token file it is read-only, on a
// loopback address, reading the ledger read-only; with one, its signed-in
// operators act through the CLI's own code paths.
func consoleCommand(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("console", true)
	var addr, webUI, tokenFile, tlsCert, tlsKey string
	fs.StringVar(&addr, "addr", console.DefaultAddr, "host:port to serve the page on (loopback only without --token-file)")
	fs.StringVar(&webUI, "web-ui", "", "base URL of the Temporal Web UI, for the links to workflows (e.g. http://127.0.0.1:8233)")
	fs.StringVar(&tokenFile, "token-file", os.Getenv(app.EnvConsoleTokenFile), "file of operator tokens (NAME:TOKEN lines, mode 0600; env "+app.EnvConsoleTokenFile+"): its operators sign in and act on the page; never a token itself")
	fs.StringVar(&tlsCert, "tls-cert", "", "serve HTTPS with this certificate (PEM file; with --tls-key)")
	fs.StringVar(&tlsKey, "tls-key", "", "the certificate's private key (PEM file; with --tls-cert)")
	var allowHosts []string
	fs.Func("allow-host", "a host name the page answers besides its --addr and loopback names, e.g. the name of a proxy in front of it (repeatable); any other Host gets 421", func(name string) error {
		if err := console.CheckAllowHost(name); err != nil {
			return err
		}
		allowHosts = append(allowHosts, name)
		return nil
	})
	if err := c.parse(fs, args); err != nil {
		return err
	}
	// Refused before anything is opened or dialled.
	if err := app.CheckListenPort("--addr", addr); err != nil {
		return usageError{fmt.Errorf("%w, e.g. `%s`", err, shellJoin(append([]string{"starter", "console"}, app.WithFlag(args, "--addr", console.DefaultAddr)...)))}
	}
	if err := console.CheckAddr(addr, tokenFile != ""); err != nil {
		return usageError{err}
	}
	if _, err := console.LoadTLS(tlsCert, tlsKey); err != nil {
		return usageError{err}
	}
	scheme := "http"
	if tlsCert != "" {
		scheme = "https"
	}
	if u, err := url.Parse(webUI); webUI != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil) {
		return usageError{fmt.Errorf("--web-ui %q is not an http(s) URL without a user: give the Web UI's base, e.g. --web-ui http://127.0.0.1:8233", app.RedactURL(webUI))}
	}
	var creds *console.Credentials
	if tokenFile != "" {
		var err error
		if creds, err = console.LoadCredentials(tokenFile); err != nil {
			return usageError{err}
		}
	}
	set, err := c.pipelines()
	if err != nil {
		return err
	}
	open := c.openLedgerReadOnly
	if creds != nil {
		open = c.openLedgerToWrite
	}
	led, err := open(ctx)
	if err != nil {
		return err
	}
	defer led.Close()
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	var actions *console.Actions
	mode := "read-only"
	if creds != nil {
		actions = &console.Actions{Ledger: led, Pipelines: set, Temporal: cl,
			Episodes:  &operator.EpisodeCommands{Client: cl, Pipelines: set, TaskQueue: c.cfg.TaskQueue, Ledger: led},
			Schedules: &operator.Schedules{Client: cl, Pipelines: set, TaskQueue: c.cfg.TaskQueue, LedgerID: led.ID(), Namespace: c.resolvedNamespace, HoldLedger: led},
		}
		mode = "operators of " + tokenFile + " act after signing in"
	}
	logger := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return console.Serve(ctx, console.ServerConfig{
		Addr:        addr,
		TLSCertFile: tlsCert,
		TLSKeyFile:  tlsKey,
		Logger:      logger,
		Credentials: creds,
		Actions:     actions,
		AllowHosts:  allowHosts,
		AllowHostCommand: func(name string) string {
			cmd := allot.ConsoleCommand(addr, tokenFile)
			if tlsCert != "" {
				cmd += " --tls-cert " + allot.ShellQuote(tlsCert) + " --tls-key " + allot.ShellQuote(tlsKey)
			}
			if webUI != "" {
				cmd += " --web-ui " + allot.ShellQuote(webUI)
			}
			for _, h := range allowHosts {
				cmd += " --allow-host " + allot.ShellQuote(h)
			}
			return cmd + " --allow-host " + allot.ShellQuote(name)
		},
		Read: console.ReadInput{Ledger: led, Pipelines: set, Temporal: cl, Namespace: c.resolvedNamespace,
			WebUI: strings.TrimSuffix(webUI, "/")},
		Ready: func(at string) {
			fmt.Fprintf(c.stdout, "operator page: %s://%s/ (ledger %s, %s; Ctrl-C stops it)\n", scheme, at, app.RedactURL(c.cfg.Ledger), mode)
		},
	})
}

// operatorTokenCommand is `starter operator-token`: add an operator with a
// fresh token to the operator page's token file, printing no token.
func operatorTokenCommand(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("operator-token", false)
	var name, file string
	fs.StringVar(&name, "name", "", "the operator's name, recorded with each of their actions (required)")
	fs.StringVar(&file, "file", os.Getenv(app.EnvConsoleTokenFile), "the token file (created with mode 0600; env "+app.EnvConsoleTokenFile+")")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if name == "" || file == "" {
		return usageError{errors.New("starter operator-token --name NAME --file FILE: --name and --file are required")}
	}
	if err := ctx.Err(); err != nil {
		return err // interrupted before anything is written
	}
	if err := console.AddOperator(file, name); err != nil {
		return usageError{err}
	}
	c.print(map[string]string{"operator": name, "file": file}, func(w io.Writer) {
		fmt.Fprintf(w, "added operator %s to %s (the token is in the file only: hand it over as you would a password)\n", name, file)
	})
	return nil
}
