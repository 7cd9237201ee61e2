package console

// Which Host names the page answers (docs/design.md, "The operator
// page"). Being on loopback keeps other machines off the page, not other
// sites: a page of another site can point its own DNS name at 127.0.0.1
// (DNS rebinding), and the browser then sends its requests here, Host
// naming that site, and lets its script read the answers. The page
// answers only its own names, so such a request reads nothing.

import (
	"fmt"
	"net"
	"net/http"
	"strings"

	"allot"
)

// hostPolicy is the Host names the page answers: loopback names always;
// the host of the address it listens on, and the names given by
// --allow-host. Listening on every address (0.0.0.0, ::), it answers an
// IP address as Host too: no DNS name is rebound through an address
// typed as such.
type hostPolicy struct {
	names map[string]bool // canonical (hostKey)
	anyIP bool
	// listen is the address listened on, for the refusal's advice.
	listen string
	// command is ServerConfig.AllowHostCommand.
	command func(name string) string
}

// newHostPolicy is the policy of a page listening on addr with the names
// allowed besides.
func newHostPolicy(addr string, allowed []string) (hostPolicy, error) {
	p := hostPolicy{names: map[string]bool{}, listen: addr}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return p, fmt.Errorf("--addr %q is not host:port: give a loopback address, e.g. --addr %s", addr, DefaultAddr)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		p.anyIP = true
	} else {
		p.names[hostKey(host)] = true
	}
	for _, name := range allowed {
		if err := CheckAllowHost(name); err != nil {
			return p, err
		}
		p.names[hostKey(name)] = true
	}
	return p, nil
}

// CheckAllowHost refuses what is not a host name to allow: a port, a
// scheme, a path or a wildcard.
func CheckAllowHost(name string) error {
	if name == "" || strings.ContainsAny(name, ":/*@ \t") && net.ParseIP(strings.Trim(name, "[]")) == nil || len(name) > 253 {
		return fmt.Errorf("--allow-host %q is not a host name: give the name people type in the address bar, without scheme or port, e.g. --allow-host allot.example.com", name)
	}
	return nil
}

// hostKey is a host name as compared: lower case, without brackets or a
// final dot; an IP address in its canonical form.
func hostKey(host string) string {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if ip := net.ParseIP(host); ip != nil {
		return ip.String()
	}
	return host
}

// allows reports whether the page answers a request whose Host header is
// hostport (the port is not compared: a rebinding page uses the page's
// own).
func (p hostPolicy) allows(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if host == "" {
		return false
	}
	key := hostKey(host)
	ip := net.ParseIP(key)
	switch {
	case key == "localhost", ip != nil && ip.IsLoopback():
		return true
	case p.names[key]:
		return true
	default:
		return p.anyIP && ip != nil
	}
}

// misdirected answers a request for another Host: 421, a short plain
// text naming the flag, and nothing of the ledger. The script of the site
// that sent it may read it, so it says nothing of this page's setup.
func (s *Server) misdirected(w http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	host = strings.Trim(host, "[]")
	var advice string
	if s.hosts.command != nil {
		advice = "If you reach it by this name on purpose, add --allow-host " + allot.ShellQuote(host) + " to the command that serves it (its log prints the whole command)."
		s.log.Warn("operator page: refused a request for a host name it does not answer (another site's page pointing its name here, or a name to allow)",
			"host", host, "remote", r.RemoteAddr, "to_allow_it", s.hosts.command(host))
	} else {
		advice = "Open it by a loopback name instead, e.g. http://" + loopbackURLHost(s.hosts.listen) + "/."
		s.log.Warn("operator page: refused a request for a host name it does not answer (another site's page pointing its name here)", "host", host, "remote", r.RemoteAddr)
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusMisdirectedRequest)
	fmt.Fprintf(w, "421 misdirected request: this operator page answers the host names it listens on and loopback names, not %q, so that no other site's page can read it by pointing its own name at this machine. %s\n", host, advice)
}

// loopbackURLHost is host:port of a loopback URL for the page listening
// on addr.
func loopbackURLHost(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return DefaultAddr
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
