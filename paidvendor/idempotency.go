package paidvendor

import (
	"fmt"

	"github.com/google/uuid"
)

// validateIdempotencyKey accepts a UUID in canonical lowercase form only, so
// the key the vendor stores is byte-for-byte the key a later lookup sends.
func validateIdempotencyKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: idempotency key is empty: derive it with allot.IdempotencyKey", ErrInvalidRequest)
	}
	u, err := uuid.Parse(key)
	if err != nil || u.String() != key {
		return fmt.Errorf("%w: idempotency key %s is not a lowercase canonical UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", ErrInvalidRequest, quoteForError(key))
	}
	return nil
}
