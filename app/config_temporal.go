package app

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"google.golang.org/grpc/codes"
)

// The envconfig variables that connection errors name.
const (
	EnvTemporalAddress    = "TEMPORAL_ADDRESS"
	EnvTemporalAPIKey     = "TEMPORAL_API_KEY"
	EnvTemporalTLS        = "TEMPORAL_TLS"
	EnvTemporalClientCert = "TEMPORAL_TLS_CLIENT_CERT_PATH"
	EnvTemporalClientKey  = "TEMPORAL_TLS_CLIENT_KEY_PATH"
	EnvTemporalServerCA   = "TEMPORAL_TLS_SERVER_CA_CERT_PATH"
	EnvTemporalServerName = "TEMPORAL_TLS_SERVER_NAME"
	EnvTemporalProfile    = "TEMPORAL_PROFILE"
	EnvTemporalConfigFile = "TEMPORAL_CONFIG_FILE"
)

// temporalConfigError explains why envconfig could not load the Temporal
// settings: a profile that is not in the file names the file and its
// profiles, and a value that does not parse is not quoted when it may be a
// secret.
func temporalConfigError(err error, getenv func(string) string) error {
	msg := err.Error()
	if strings.Contains(msg, "unable to find profile") {
		profile, file := getenv(EnvTemporalProfile), cmp.Or(getenv(EnvTemporalConfigFile), envconfig.DefaultConfigFilePath())
		if _, statErr := os.Stat(file); statErr != nil {
			return fmt.Errorf("%s=%q, but the Temporal config file %s does not exist: set %s to the file with that profile, or unset %s",
				EnvTemporalProfile, profile, file, EnvTemporalConfigFile, EnvTemporalProfile)
		}
		names := []string{"none"}
		if conf, err := envconfig.LoadClientConfig(envconfig.LoadClientConfigOptions{ConfigFilePath: file}); err == nil && len(conf.Profiles) > 0 {
			names = slices.Sorted(maps.Keys(conf.Profiles))
		}
		return fmt.Errorf("%s=%q is not a profile of %s (it has %s): set %s to one of them, or %s to the file that has it",
			EnvTemporalProfile, profile, file, strings.Join(names, ", "), EnvTemporalProfile, EnvTemporalConfigFile)
	}
	if m := secretSetting.FindStringSubmatch(msg); m != nil {
		// The TOML parser quotes what it found, which may be the secret.
		return fmt.Errorf("load the Temporal config file (%s): %s: the value does not parse (not shown: it may be a secret): write it as a quoted string", EnvTemporalConfigFile, m[1])
	}
	return fmt.Errorf("load the Temporal client settings (%s, %s, %s, %s, ...): %w", EnvTemporalConfigFile, EnvTemporalProfile, EnvTemporalAddress, "TEMPORAL_NAMESPACE", err)
}

// secretSetting matches a TOML error on a secret value, up to the value.
var secretSetting = regexp.MustCompile(`(toml: line \d+ \(last key "[^"]*(?:api_key|_data|auth)"\))`)

// ConnectError explains a failed connection to Temporal with opts. A
// refused credential or a failed TLS handshake names the variables (and the
// profile, when one is in use) that fix it; any other failure gets
// otherwise, the caller's remedy for an unreachable server. It names
// settings, never their values: the API key stays out of errors and logs.
func ConnectError(err error, opts client.Options, otherwise string) error {
	return connectError(err, opts, otherwise, os.Getenv)
}

func connectError(err error, opts client.Options, otherwise string, getenv func(string) string) error {
	remedy := connectRemedy(err, opts, profileHint(getenv))
	if remedy == "" {
		remedy = otherwise
	}
	return fmt.Errorf("connect to Temporal at %s: %s: %w", hostPort(opts), remedy, err)
}

// profileHint names the profile in use ("" when none is chosen): where
// else the settings may come from.
func profileHint(getenv func(string) string) string {
	profile, file := getenv(EnvTemporalProfile), getenv(EnvTemporalConfigFile)
	switch {
	case profile != "" && file != "":
		return fmt.Sprintf("profile %q in %s", profile, file)
	case profile != "":
		return fmt.Sprintf("profile %q", profile)
	case file != "":
		return "the default profile in " + file
	}
	return ""
}

// connectRemedy is what to fix for a credential or TLS failure, or "".
func connectRemedy(err error, opts client.Options, profile string) string {
	or := func(section string) string {
		if profile == "" {
			return "(or the profile's " + section + ")"
		}
		return "(or " + section + " of " + profile + ")"
	}
	hasKey := opts.Credentials != nil
	tlsOn := opts.ConnectionOptions.TLS != nil || hasKey
	hasClientCert := tlsOn && opts.ConnectionOptions.TLS != nil &&
		(len(opts.ConnectionOptions.TLS.Certificates) > 0 || opts.ConnectionOptions.TLS.GetClientCertificate != nil)
	msg := err.Error()
	code := serviceerror.ToStatus(err).Code()
	switch {
	case code == codes.PermissionDenied || code == codes.Unauthenticated:
		if hasKey {
			return fmt.Sprintf("the server refused the API key (%s): check %s %s, and that the key may use namespace %q",
				code, EnvTemporalAPIKey, or("api_key"), opts.Namespace)
		}
		if hasClientCert {
			return fmt.Sprintf("the server refused the client certificate (%s): check %s and %s %s, or set %s",
				code, EnvTemporalClientCert, EnvTemporalClientKey, or("tls section"), EnvTemporalAPIKey)
		}
		return fmt.Sprintf("the server wants credentials (%s): set %s, or %s and %s %s",
			code, EnvTemporalAPIKey, EnvTemporalClientCert, EnvTemporalClientKey, or("api_key or tls section"))
	case hasClientCert && strings.Contains(msg, "certificate required"):
		// Go's TLS sends no certificate whose issuer the server does not
		// list as one it trusts.
		return fmt.Sprintf("TLS handshake failed: the server asks for a client certificate signed by a CA it trusts, and the one given is not: check %s and %s %s",
			EnvTemporalClientCert, EnvTemporalClientKey, or("tls section"))
	case strings.Contains(msg, "certificate required") || (!hasClientCert && strings.Contains(msg, "handshake failure")):
		return fmt.Sprintf("TLS handshake failed: the server asks for a client certificate: set %s and %s %s",
			EnvTemporalClientCert, EnvTemporalClientKey, or("tls section"))
	case strings.Contains(msg, "bad certificate") || strings.Contains(msg, "unknown certificate authority") ||
		strings.Contains(msg, "expired certificate") || strings.Contains(msg, "handshake failure"):
		return fmt.Sprintf("TLS handshake failed: the server refused the client certificate: check %s and %s %s (a certificate signed by a CA the server trusts, and its key)",
			EnvTemporalClientCert, EnvTemporalClientKey, or("tls section"))
	case strings.Contains(msg, "x509:") && strings.Contains(msg, "not valid for"):
		return fmt.Sprintf("TLS handshake failed: the server's certificate is not for this address: set %s to the name in it %s, or connect by that name",
			EnvTemporalServerName, or("tls section"))
	case strings.Contains(msg, "x509:"):
		return fmt.Sprintf("TLS handshake failed: the server's certificate is not trusted: set %s to the CA that signed it %s",
			EnvTemporalServerCA, or("tls section"))
	case !tlsOn && (strings.Contains(msg, "server preface") || strings.Contains(msg, "connection reset")):
		return fmt.Sprintf("the server closed a plain connection (does it want TLS?): set %s=true, with %s and %s if it wants a client certificate %s",
			EnvTemporalTLS, EnvTemporalClientCert, EnvTemporalClientKey, or("tls section"))
	case tlsOn && (strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset") || strings.HasSuffix(msg, "EOF")):
		// With TLS 1.3 the server checks the client's certificate after the
		// client's handshake is done: its refusal may arrive as a closed
		// connection.
		if !hasClientCert {
			return fmt.Sprintf("the server closed the TLS connection: it most likely asks for a client certificate: set %s and %s %s",
				EnvTemporalClientCert, EnvTemporalClientKey, or("tls section"))
		}
		return fmt.Sprintf("the server closed the TLS connection: it may want a client certificate signed by a CA it trusts: check %s and %s %s",
			EnvTemporalClientCert, EnvTemporalClientKey, or("tls section"))
	case tlsOn && (strings.Contains(msg, "first record does not look like a TLS handshake") || strings.Contains(msg, "tls:")):
		return fmt.Sprintf("TLS handshake failed (does the server speak TLS?): check %s and %s %s",
			EnvTemporalAddress, EnvTemporalTLS, or("address and tls section"))
	}
	return ""
}
