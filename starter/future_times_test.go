package main

import (
	"strings"
	"testing"
	"time"
)

// Times that have not come yet are refused before Temporal is dialed, so
// nothing is started or written: a backfill whose range reaches past now
// (fast or through the Schedule), a catch-up until a later time. The
// refusal names the time and prints the command that ends at now.
func TestTimesStillToComeAreRefusedBeforeAnythingIsContacted(t *testing.T) {
	// TEMPORAL_ADDRESS points nowhere: a command that got as far as
	// dialing would fail with "connect to Temporal" instead.
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	past := time.Now().Add(-48 * time.Hour).UTC().Format(time.RFC3339)
	future := time.Now().Add(200 * 24 * time.Hour).UTC().Format(time.RFC3339)
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"schedule", "backfill", "--pipeline", "weekly-video", "--from", past, "--to", future},
			[]string{"--to " + future + " is after now", "starter schedule backfill --pipeline weekly-video --from " + past + " --to "}},
		{[]string{"schedule", "backfill", "--pipeline", "weekly-video", "--from", past, "--to", future, "--via-schedule", "--yes"},
			[]string{"--to " + future + " is after now", "--yes --via-schedule"}},
		{[]string{"schedule", "backfill", "--pipeline", "weekly-video", "--from", future, "--to", time.Now().Add(300 * 24 * time.Hour).UTC().Format(time.RFC3339)},
			[]string{"is after now", "the whole range is still to come"}},
		{[]string{"schedule", "catch-up", "--pipeline", "weekly-video", "--until", future},
			[]string{"--until " + future + " is after now", "starter schedule catch-up --pipeline weekly-video --until "}},
	}
	for _, c := range cases {
		code, _, stderr := run(t, c.args...)
		if code != exitUsage || strings.Contains(stderr, "connect to Temporal") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error before dialing", c.args, code, stderr)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: stderr %q; want %q", c.args, stderr, w)
			}
		}
	}
}
