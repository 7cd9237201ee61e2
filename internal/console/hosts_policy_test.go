package console

import "testing"

// The Host names of a page by where it listens: its own address's host;
// on every address, any IP address (no DNS name is rebound through one),
// never a name it was not given.
func TestHostPolicyByListenAddress(t *testing.T) {
	for _, c := range []struct {
		addr    string
		allowed []string
		answers []string
		refuses []string
	}{
		{"127.0.0.1:8090", nil, []string{"127.0.0.1:8090", "localhost", "[::1]:8090"}, []string{"evil.example", "10.0.0.5:8090", ""}},
		{"page.lan:8090", nil, []string{"page.lan:8090", "PAGE.LAN.", "localhost:8090"}, []string{"evil.example:8090", "10.0.0.5", "page.lan.evil.example"}},
		{"10.0.0.5:8090", []string{"allot.example.com"}, []string{"10.0.0.5:8090", "allot.example.com:443"}, []string{"10.0.0.6:8090", "evil.example"}},
		{"0.0.0.0:8090", nil, []string{"10.0.0.5:8090", "[fd00::5]:8090", "127.0.0.1"}, []string{"evil.example:8090", "page.lan"}},
		{"[::]:8090", []string{"page.lan"}, []string{"192.168.1.2", "page.lan:8090"}, []string{"evil.example"}},
	} {
		p, err := newHostPolicy(c.addr, c.allowed)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range c.answers {
			if !p.allows(h) {
				t.Errorf("listening on %s (allowing %v): Host %q is refused", c.addr, c.allowed, h)
			}
		}
		for _, h := range c.refuses {
			if p.allows(h) {
				t.Errorf("listening on %s (allowing %v): Host %q is answered", c.addr, c.allowed, h)
			}
		}
	}
}
