package docs

import (
	"os"
	"regexp"
	"testing"

	"go.temporal.io/sdk/contrib/envconfig"
)

// The Temporal Cloud profiles deploying.md shows load with envconfig, as
// the worker and the starter load them, into the settings the text says:
// the namespace endpoint with client certificates, the regional endpoint
// with an API key and TLS.
func TestDeployingCloudProfiles(t *testing.T) {
	doc, err := os.ReadFile("deploying.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Temporal Cloud and secured clusters\n.*?```toml\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("deploying.md has no TOML example under \"Temporal Cloud and secured clusters\"")
	}
	load := func(profile string) envconfig.ClientConfigProfile {
		t.Helper()
		p, err := envconfig.LoadClientConfigProfile(envconfig.LoadClientConfigProfileOptions{
			ConfigFileData: m[1], ConfigFileProfile: profile, ConfigFileStrict: true, DisableEnv: true,
		})
		if err != nil {
			t.Fatalf("profile %q of deploying.md: %v", profile, err)
		}
		return p
	}

	certs := load("cloud")
	if certs.Address != "my-ns.a1b2c.tmprl.cloud:7233" || certs.Namespace != "my-ns.a1b2c" || certs.APIKey != "" ||
		certs.TLS == nil || certs.TLS.ClientCertPath == "" || certs.TLS.ClientKeyPath == "" {
		t.Errorf("profile cloud: %+v %+v", certs, certs.TLS)
	}
	apiKey := load("cloud-apikey")
	if apiKey.Address != "us-east-1.aws.api.temporal.io:7233" || apiKey.Namespace != "my-ns.a1b2c" || apiKey.APIKey == "" || apiKey.TLS != nil {
		t.Errorf("profile cloud-apikey: %+v", apiKey)
	}
	// A client certificate's files must exist to make client options; the
	// API key profile's options show TLS is on without a tls section.
	opts, err := apiKey.ToClientOptions(envconfig.ToClientOptionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if opts.HostPort != apiKey.Address || opts.Namespace != "my-ns.a1b2c" || opts.Credentials == nil || opts.ConnectionOptions.TLS == nil {
		t.Errorf("profile cloud-apikey's client options: %+v", opts)
	}
}
