package activities

import "context"

// StaticCredentials is a fixed key, for the embedded development setup where
// the simulated vendor's key is known.
type StaticCredentials struct{ key string }

// NewStaticCredentials holds key for the vendor client.
func NewStaticCredentials(key string) *StaticCredentials { return &StaticCredentials{key: key} }

// VendorAPIKey implements CredentialsSource.
func (s *StaticCredentials) VendorAPIKey(context.Context) (string, error) { return s.key, nil }

// String keeps the key out of logs and fmt output.
func (s *StaticCredentials) String() string { return "StaticCredentials{redacted}" }
