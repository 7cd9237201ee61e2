package paidvendor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Environment variables the default vendor's address and key come from.
const (
	EnvVendorAPIKey     = "ALLOT_VENDOR_API_KEY"
	EnvVendorAPIKeyFile = "ALLOT_VENDOR_API_KEY_FILE"
	EnvVendorURL        = "ALLOT_VENDOR_URL"
)

// CredentialsSource yields a vendor's API key. Paid activities read it only
// after the episode check, and never pass it anywhere but the vendor's
// client or adapter.
type CredentialsSource interface {
	VendorAPIKey(ctx context.Context) (string, error)
}

// readAPIKey is the one reader of an API key: the file's contents when a
// file is named, else the environment variable's value, trimmed; "" when
// both are empty. Read at every call, so a rotated file is picked up
// without a restart.
func readAPIKey(file, env string) (key string, fromFile bool, err error) {
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return "", true, err
		}
		return strings.TrimSpace(string(data)), true, nil
	}
	if env == "" {
		return "", false, nil
	}
	return strings.TrimSpace(os.Getenv(env)), false, nil
}

// EnvCredentials is the default vendor's key: ALLOT_VENDOR_API_KEY, or the
// file named by ALLOT_VENDOR_API_KEY_FILE.
type EnvCredentials struct{}

// VendorAPIKey implements CredentialsSource.
func (EnvCredentials) VendorAPIKey(context.Context) (string, error) {
	key, fromFile, err := readAPIKey(os.Getenv(EnvVendorAPIKeyFile), EnvVendorAPIKey)
	switch {
	case err != nil:
		return "", fmt.Errorf("read the vendor API key file named by %s: %w", EnvVendorAPIKeyFile, err)
	case key == "" && fromFile:
		return "", fmt.Errorf("the vendor API key file named by %s is empty", EnvVendorAPIKeyFile)
	case key == "":
		return "", errors.New("no vendor API key: set " + EnvVendorAPIKey + " or " + EnvVendorAPIKeyFile)
	}
	return key, nil
}

// VendorKey is where a [[vendor]]'s API key comes from: the environment
// variable or the file its api_key_env or api_key_file names. With
// neither, the vendor needs no key ("").
type VendorKey struct {
	Vendor string
	Env    string
	File   string
}

// VendorAPIKey implements CredentialsSource.
func (k VendorKey) VendorAPIKey(context.Context) (string, error) {
	if k.File == "" && k.Env == "" {
		return "", nil
	}
	key, _, err := readAPIKey(k.File, k.Env)
	if err != nil {
		return "", fmt.Errorf("vendor %s: read the API key file %s (its api_key_file): %w", k.Vendor, k.File, err)
	}
	if key == "" {
		return "", fmt.Errorf("vendor %s has no API key: set %s", k.Vendor, k.where())
	}
	return key, nil
}

func (k VendorKey) where() string {
	if k.File != "" {
		return "the file " + k.File + " (its api_key_file)"
	}
	return "the environment variable " + k.Env + " (its api_key_env)"
}

// StaticCredentials is a fixed key, for the embedded development setup
// where the simulated vendor's key is known.
type StaticCredentials struct{ key string }

// NewStaticCredentials holds key for the vendor client.
func NewStaticCredentials(key string) *StaticCredentials { return &StaticCredentials{key: key} }

// VendorAPIKey implements CredentialsSource.
func (s *StaticCredentials) VendorAPIKey(context.Context) (string, error) { return s.key, nil }

// String keeps the key out of logs and fmt output.
func (s *StaticCredentials) String() string { return "StaticCredentials{redacted}" }

// ClientFactory builds a vendor client for an API key.
type ClientFactory func(apiKey string) (Client, error)

// HTTPClientFactory is the ClientFactory of the vendor HTTP API at baseURL.
func HTTPClientFactory(baseURL string) ClientFactory {
	return func(apiKey string) (Client, error) {
		c, err := NewHTTPClient(baseURL, apiKey, nil)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}
