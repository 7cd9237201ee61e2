package paidvendor

import (
	"testing"

	"github.com/google/uuid"

	"allot"
)

func TestIdempotencyKeyGolden(t *testing.T) {
	// These values are sent to vendors and must never change: a change
	// would make a retry of an in-flight task look like new work.
	for _, tc := range []struct {
		pipeline, episode, step string
		revision                int
		want                    string
	}{
		{"weekly-video", "2026-W32-0", "render", 0, "2e46c9d1-1d4f-58bd-a5ab-443d59c48f4b"},
		{"weekly-video", "2026-W32-0", "render", 1, "ffb993c8-cbe3-592a-bc13-a23a1687019d"},
		{"", "", "", 0, "8fc89ab6-87a4-5a72-b30a-e3b7c80c0641"},
	} {
		got := allot.IdempotencyKey(tc.pipeline, tc.episode, tc.step, tc.revision)
		if got != tc.want {
			t.Errorf("allot.IdempotencyKey(%q, %q, %q, %d) = %s, want %s", tc.pipeline, tc.episode, tc.step, tc.revision, got, tc.want)
		}
		u, err := uuid.Parse(got)
		if err != nil || u.Version() != 5 || u.Variant() != uuid.RFC4122 || u.String() != got {
			t.Errorf("%s is not a canonical RFC 4122 version 5 UUID", got)
		}
		if err := validateIdempotencyKey(got); err != nil {
			t.Errorf("the client would refuse its own key: %v", err)
		}
	}
}

func TestIdempotencyKeyStableAndDistinct(t *testing.T) {
	type in struct {
		p, e, s string
		r       int
	}
	inputs := []in{
		{"a-b", "c", "s", 0},
		{"a", "b-c", "s", 0},
		{"a", "b", "c|s", 0},
		{"a", "b|c", "s", 0},
		{"a|1:b", "", "s", 0},
		{"a", "1:b", "s", 0},
		{"ab", "", "s", 0},
		{"a", "b", "s", 0},
		{"", "ab", "s", 0},
		{"a", "b", "s", 1},
		{"a", "b", "s", -1},
		{"a", "b", "s", 10},
		{"a", "b", "s1", 0},
		{"a", "b", "s|1", 0},
		{"weekly-video", "2026-W32-0", "render", 0},
		{"weekly-video", "2026-W32-1", "render", 0},
		{"weekly-video", "2026-W33-0", "render", 0},
		{"weekly-video", "2026-W32-0", "voice", 0},
		{"daily-report", "2026-W32-0", "render", 0},
	}
	seen := map[string]in{}
	for _, x := range inputs {
		k := allot.IdempotencyKey(x.p, x.e, x.s, x.r)
		if again := allot.IdempotencyKey(x.p, x.e, x.s, x.r); again != k {
			t.Fatalf("%+v: %s then %s", x, k, again)
		}
		if prev, dup := seen[k]; dup {
			t.Fatalf("%+v and %+v share key %s", prev, x, k)
		}
		seen[k] = x
	}
}
