package fleet

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseEndpoints checks --fleet parsing on any input: no panic, and
// what it accepts is a non-empty list of host:port with both parts set,
// none of which holds a comma or a scheme, and every port a number from
// 1 to 65535 ("etcd://0://" was accepted as the endpoint "0://").
func FuzzParseEndpoints(f *testing.F) {
	for _, s := range []string{"etcd://127.0.0.1:2379", "etcds://a:1,b:2", "etcd://a:1, etcd://b:2", "http://x:1", "a:1,,b:2", "etcd://[::1]:2379", ":2379", "etcd://"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		eps, _, err := ParseEndpoints(v)
		if err != nil {
			if eps != nil {
				t.Fatalf("%q: endpoints %v with error %v", v, eps, err)
			}
			return
		}
		if len(eps) == 0 {
			t.Fatalf("%q: accepted with no endpoint", v)
		}
		for _, e := range eps {
			host, port, err := net.SplitHostPort(e)
			n, perr := strconv.Atoi(port)
			if err != nil || host == "" || perr != nil || n < 1 || n > 65535 || strings.Contains(e, ",") || strings.Contains(e, "://") {
				t.Fatalf("%q: accepted endpoint %q", v, e)
			}
		}
	})
}
