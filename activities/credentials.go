package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"allot/paidvendor"
)

// Environment variables the vendor credentials come from.
const (
	EnvVendorAPIKey     = "ALLOT_VENDOR_API_KEY"
	EnvVendorAPIKeyFile = "ALLOT_VENDOR_API_KEY_FILE"
	EnvVendorURL        = "ALLOT_VENDOR_URL"
)

// CredentialsSource yields the vendor's API key. Paid activities read it only
// after the episode check, and never pass it anywhere but the vendor client.
type CredentialsSource interface {
	VendorAPIKey(ctx context.Context) (string, error)
}

// EnvCredentials reads ALLOT_VENDOR_API_KEY, or the file named by
// ALLOT_VENDOR_API_KEY_FILE, each time it is asked, so a rotated file is
// picked up without a restart.
type EnvCredentials struct{}

// VendorAPIKey implements CredentialsSource.
func (EnvCredentials) VendorAPIKey(context.Context) (string, error) {
	if file := os.Getenv(EnvVendorAPIKeyFile); file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read the vendor API key file named by %s: %w", EnvVendorAPIKeyFile, err)
		}
		key := strings.TrimSpace(string(data))
		if key == "" {
			return "", fmt.Errorf("the vendor API key file named by %s is empty", EnvVendorAPIKeyFile)
		}
		return key, nil
	}
	if key := strings.TrimSpace(os.Getenv(EnvVendorAPIKey)); key != "" {
		return key, nil
	}
	return "", errors.New("no vendor API key: set " + EnvVendorAPIKey + " or " + EnvVendorAPIKeyFile)
}

// VendorFactory builds a vendor client for an API key.
type VendorFactory func(apiKey string) (paidvendor.Client, error)

// HTTPVendor is the VendorFactory of the vendor's HTTP API at baseURL.
func HTTPVendor(baseURL string) VendorFactory {
	return func(apiKey string) (paidvendor.Client, error) {
		c, err := paidvendor.NewHTTPClient(baseURL, apiKey, nil)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}
