package allot

import (
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// IdempotencyNamespace is the UUID namespace of paid-task idempotency keys.
// It is part of every key ever sent to a vendor: changing it would make every
// retry of an in-flight task look like new work. Never change it.
const IdempotencyNamespace = "d7471ac7-bb1f-4dc8-a02c-f5a20052084b"

var idempotencyNamespace = uuid.MustParse(IdempotencyNamespace)

// idempotencyEncodingVersion names the byte layout hashed below; it is part
// of the hashed name so a future layout cannot collide with this one.
const idempotencyEncodingVersion = "allot.paidtask.v1"

// IdempotencyKey returns the vendor idempotency key of one paid task: a
// name-based (version 5, SHA-1) UUID of (pipeline, episode, step, revision)
// under IdempotencyNamespace. The same four values give the same key in every
// process, on every retry, forever; any difference in any value gives a
// different key.
//
// The values are length-prefixed before hashing, so no choice of separators
// inside them can make two different tuples encode alike: ("a-b", "c") and
// ("a", "b-c") differ.
func IdempotencyKey(pipeline, episodeID, step string, revision int) string {
	var b strings.Builder
	b.WriteString(idempotencyEncodingVersion)
	for _, field := range []string{pipeline, episodeID, step} {
		// "|<byte length>:<bytes>"
		b.WriteByte('|')
		b.WriteString(strconv.Itoa(len(field)))
		b.WriteByte(':')
		b.WriteString(field)
	}
	b.WriteByte('|')
	b.WriteString(strconv.Itoa(revision))
	return uuid.NewSHA1(idempotencyNamespace, []byte(b.String())).String()
}
