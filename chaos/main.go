// Command chaos runs allot under faults, as real processes, and checks its
// promises (see README.md in this folder):
//
//	go run ./chaos --scale small [--seed N] [--postgres DSN]
//	go run ./chaos --scale full --seed 7 --postgres 'postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable'
//
// It prints progress on stderr and one summary line on stdout, and exits 1
// on any violation (2 on a bad command line).
//
// --measure-kills measures episode times under repeated worker kills only,
// for any worker and vendorsim binaries (for instance an old commit's):
//
//	go run ./chaos --measure-kills --seed 7 --postgres DSN [--worker-bin B --vendorsim-bin B]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"allot/internal/chaos"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	var (
		scale, postgres, dir, binDir string
		workerBin, vendorBin         string
		seed                         uint64
		workers                      int
		keep, quiet, measure, broken bool
		episodes, kills              int
		load, timeout, latency       time.Duration
		sendTimeout                  time.Duration
	)
	names := make([]string, 0, len(chaos.Scales))
	for n := range chaos.Scales {
		names = append(names, n)
	}
	sort.Strings(names)
	fs.StringVar(&scale, "scale", "small", "size of the run: "+strings.Join(names, " or "))
	fs.Uint64Var(&seed, "seed", 1, "seed `N` of the load and fault schedule")
	fs.StringVar(&postgres, "postgres", "", "PostgreSQL `URL` to create the run's ledger database with (three workers share it); default: SQLite and one worker")
	fs.IntVar(&workers, "workers", 0, "worker processes (default 3 on PostgreSQL, 1 on SQLite)")
	fs.StringVar(&dir, "dir", "", "directory for the run's state and logs (default: a temporary one, removed after a clean run)")
	fs.BoolVar(&keep, "keep", false, "keep the run's directory and database after a clean run")
	fs.StringVar(&binDir, "bin-dir", "", "take worker, vendorsim, starter, devserver and activityvendor from this `DIR` instead of building them")
	fs.BoolVar(&quiet, "quiet", false, "print only the summary line")
	fs.BoolVar(&broken, "broken-vendor", false, "self-test of the checks: the strict vendor ignores idempotency keys, so the run must find violations")
	fs.BoolVar(&measure, "measure-kills", false, "measure episode times under worker kills only (see README.md)")
	fs.StringVar(&workerBin, "worker-bin", "", "--measure-kills: the worker binary to measure (default: this tree's)")
	fs.StringVar(&vendorBin, "vendorsim-bin", "", "--measure-kills: the vendorsim binary (default: this tree's)")
	fs.IntVar(&episodes, "episodes", 30, "--measure-kills: runs to start")
	fs.IntVar(&kills, "kills", 10, "--measure-kills: worker kills")
	fs.DurationVar(&load, "load", 60*time.Second, "--measure-kills: the runs are started evenly over this")
	fs.DurationVar(&latency, "vendor-latency", time.Second, "--measure-kills: added to every vendor request")
	fs.DurationVar(&sendTimeout, "send-timeout", 3*time.Second, "--measure-kills: the default vendor's send_timeout (ALLOT_VENDOR_SEND_TIMEOUT; 0: unset, 30s)")
	fs.DurationVar(&timeout, "timeout", 20*time.Minute, "--measure-kills: how long to wait for the last episode")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "chaos: unexpected argument %q: every value goes with a flag\n", fs.Arg(0))
		return 2
	}
	sc, ok := chaos.Scales[scale]
	if !ok {
		fmt.Fprintf(os.Stderr, "chaos: --scale %q: use %s\n", scale, strings.Join(names, " or "))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	progress := os.Stderr
	if quiet {
		progress = nil
	}
	var bins chaos.Binaries
	if binDir != "" {
		bins = chaos.Binaries{Worker: filepath.Join(binDir, "worker"), VendorSim: filepath.Join(binDir, "vendorsim"),
			Starter: filepath.Join(binDir, "starter"), DevServer: filepath.Join(binDir, "devserver"), ActivityVendor: filepath.Join(binDir, "activityvendor")}
	}

	if measure {
		if bins.DevServer == "" {
			tmp, err := os.MkdirTemp("", "allot-chaos-bin-")
			if err != nil {
				fmt.Fprintln(os.Stderr, "chaos:", err)
				return 1
			}
			defer os.RemoveAll(tmp)
			if progress != nil {
				fmt.Fprintln(progress, "chaos: building this tree's worker, vendorsim, starter and devserver")
			}
			if bins, err = chaos.BuildBinaries(ctx, tmp); err != nil {
				fmt.Fprintln(os.Stderr, "chaos:", err)
				return 1
			}
		}
		if workerBin != "" {
			bins.Worker = workerBin
		}
		if vendorBin != "" {
			bins.VendorSim = vendorBin
		}
		mc := chaos.MeasureConfig{Seed: seed, Postgres: postgres, Workers: workers, Dir: dir, Keep: keep, Bins: bins,
			Episodes: episodes, Kills: kills, Load: load, Timeout: timeout, VendorLatency: latency, SendTimeout: sendTimeout}
		if progress != nil {
			mc.Progress = progress
		}
		res, err := chaos.Measure(ctx, mc)
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			return 1
		}
		fmt.Println(res.Line())
		if res.NotClosedInTime {
			return 1
		}
		return 0
	}

	cfg := chaos.Config{Scale: sc, Seed: seed, Postgres: postgres, Workers: workers, Dir: dir, Keep: keep, Bins: bins, BrokenVendor: broken}
	if progress != nil {
		cfg.Progress = progress
	}
	sum, err := chaos.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		if sum.Scale != "" {
			fmt.Println(sum.Line())
		}
		return 1
	}
	fmt.Println(sum.Line())
	if len(sum.Violations) > 0 {
		for _, v := range sum.Violations {
			fmt.Fprintln(os.Stderr, "violation:", v)
		}
		return 1
	}
	return 0
}
