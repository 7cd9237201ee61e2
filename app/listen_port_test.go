package app

import (
	"slices"
	"strings"
	"testing"
)

// Issue 38 §4: a port out of range is refused as such, before a listen
// could blame another process; the fixed command line keeps every other
// flag as given.
func TestCheckListenPortAndTheFixedCommandLine(t *testing.T) {
	for addr, want := range map[string]string{
		":99999": "port 99999 is out of range", "127.0.0.1:65536": "port 65536 is out of range", "127.0.0.1:-1": "port -1 is out of range",
		"127.0.0.1:http": "port http is out of range", "8090": "is not HOST:PORT",
	} {
		if err := CheckListenPort("--console-addr", addr); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", addr, err, want)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", ":8090", "[::1]:65535", "localhost:1"} {
		if err := CheckListenPort("--addr", addr); err != nil {
			t.Errorf("%q refused: %v", addr, err)
		}
	}
	for _, c := range []struct{ args, want []string }{
		{[]string{"--addr", ":99999", "--web-ui", "x"}, []string{"--addr", "127.0.0.1:8090", "--web-ui", "x"}},
		{[]string{"-addr=:99999"}, []string{"--addr", "127.0.0.1:8090"}},
		{[]string{"--web-ui", "x"}, []string{"--web-ui", "x", "--addr", "127.0.0.1:8090"}},
	} {
		if got := WithFlag(c.args, "--addr", "127.0.0.1:8090"); !slices.Equal(got, c.want) {
			t.Errorf("WithFlag(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}
