package config

import (
	"strings"
	"testing"
)

// dnsTransferBase is dnsBase with a transfer block and an identity.
var dnsTransferBase = strings.Replace(dnsBase, "  gslbNames:\n", `  transfer:
    allow: [127.0.0.0/8, "::1"]
    tsigKeys:
    - {name: xfr-key., algorithm: hmac-sha256, secret: "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}
    - {name: file-key, secretFile: /etc/spillway/xfr.key}
    notify: [127.0.0.1, "127.0.0.2:5353", "[::1]:53"]
  gslbNames:
`, 1) + "spillway:\n  dnsIdentity: {version: spillway, id: edge-1}\n"

func TestDNSTransferValid(t *testing.T) {
	if _, err := Parse([]byte(dnsTransferBase), "dns.yaml"); err != nil {
		t.Fatalf("valid config rejected:\n%v", err)
	}
}

func TestDNSTransferInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"host bits", "allow: [127.0.0.0/8,", "allow: [127.0.0.1/8,", `dnsZones[gslb.example.].transfer.allow[0]: "127.0.0.1/8" has host bits set (127.0.0.0/8 is the subnet)`},
		{"not an address", "allow: [127.0.0.0/8,", "allow: [localhost,", `dnsZones[gslb.example.].transfer.allow[0]: "localhost" is not an address or a CIDR (fix: write a subnet or an address`},
		{"nobody", "    allow: [127.0.0.0/8, \"::1\"]\n", "", ""},
		{"bad secret", `secret: "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"`, `secret: "not base64!"`, `dnsZones[gslb.example.].transfer.tsigKeys[xfr-key.].secret: the secret is not base64`},
		{"no secret", `, secretFile: /etc/spillway/xfr.key}`, `}`, `dnsZones[gslb.example.].transfer.tsigKeys[file-key].secret: a secret is required`},
		{"both secrets", `, secretFile: /etc/spillway/xfr.key}`, `, secretFile: /x, secret: eA==}`, `dnsZones[gslb.example.].transfer.tsigKeys[file-key]: secret and secretFile are exclusive`},
		{"algorithm", "algorithm: hmac-sha256", "algorithm: hmac-md5", `dnsZones[gslb.example.].transfer.tsigKeys[xfr-key.].algorithm: unknown value "hmac-md5"`},
		{"duplicate key", "name: file-key,", "name: xfr-key,", `dnsZones[gslb.example.].transfer.tsigKeys[xfr-key].name: "xfr-key." is already tsigKeys[xfr-key.]`},
		{"notify", `"127.0.0.2:5353"`, `"ns2.example:53"`, `dnsZones[gslb.example.].transfer.notify[1]: "ns2.example:53" is not an address or address:port`},
		{"identity too long", "version: spillway", "version: " + strings.Repeat("v", 256), "spillway.dnsIdentity.version: a TXT string holds at most 255 bytes, not 256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(dnsTransferBase, tc.old) {
				t.Fatalf("base config has no %q", tc.old)
			}
			_, err := Parse([]byte(strings.Replace(dnsTransferBase, tc.old, tc.new, 1)), "dns.yaml")
			if tc.want == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got:\n%v\nwant an error containing %q", err, tc.want)
			}
		})
	}
	nobody := strings.Replace(dnsBase, "  gslbNames:\n", "  transfer: {notify: [127.0.0.1]}\n  gslbNames:\n", 1)
	if _, err := Parse([]byte(nobody), "dns.yaml"); err == nil || !strings.Contains(err.Error(), "dnsZones[gslb.example.].transfer: nobody may transfer the zone") {
		t.Fatalf("transfer without allow or keys: %v", err)
	}
}

// FuzzTransferACL checks the transfer block's parsers: no panics, and an
// accepted entry round-trips through its canonical form.
func FuzzTransferACL(f *testing.F) {
	for _, s := range []string{"127.0.0.0/8", "::1", "192.0.2.1", "[::1]:53", "127.0.0.1:5353", "1.2.3.4/33", "::ffff:1.2.3.4", "fe80::1%eth0", "c2VjcmV0", " eA== \n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if p, err := ParseTransferPrefix(s); err == nil {
			if q, err := ParseTransferPrefix(p.String()); err != nil || q != p {
				t.Fatalf("%q → %v does not round-trip: %v %v", s, p, q, err)
			}
		}
		if ap, err := ParseNotifyTarget(s); err == nil {
			if bq, err := ParseNotifyTarget(ap.String()); err != nil || bq != ap || !ap.Addr().IsValid() || ap.Port() == 0 {
				t.Fatalf("%q → %v does not round-trip: %v %v", s, ap, bq, err)
			}
		}
		if b, err := DecodeTSIGSecret(s); err == nil && len(b) == 0 {
			t.Fatalf("%q: empty secret accepted", s)
		}
	})
}

// Two zones may name the same TSIG key when it is the same key: the
// algorithm compares after its default, and a secret from a file cannot
// be compared at load (the DNS server checks the secrets it reads). A
// different inline secret or algorithm is still refused (review finding
// 6).
func TestTSIGKeySharedByZones(t *testing.T) {
	two := func(a, b string) string {
		z := func(name, key string) string {
			return "- name: " + name + "\n  nameServers: [ns1." + name + "]\n  transfer: {tsigKeys: [" + key + "]}\n"
		}
		return "frontends:\n- {name: dns, address: \"127.0.0.1:0\", protocol: DNS}\ndnsZones:\n" +
			z("one.example.", a) + z("two.example.", b)
	}
	const s1, s2 = `secret: "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"`, `secret: "b3RoZXJvdGhlcm90aGVyb3RoZXI="`
	for _, c := range []struct {
		name, a, b string
		ok         bool
	}{
		{"default algorithm spelled out", "{name: k., algorithm: hmac-sha256, " + s1 + "}", "{name: k., " + s1 + "}", true},
		{"inline and file", "{name: k., " + s1 + "}", "{name: k., secretFile: /etc/spillway/k.key}", true},
		{"other secret", "{name: k., " + s1 + "}", "{name: k., " + s2 + "}", false},
		{"other algorithm", "{name: k., algorithm: hmac-sha512, " + s1 + "}", "{name: k., " + s1 + "}", false},
	} {
		_, err := Parse([]byte(two(c.a, c.b)), "dns.yaml")
		if c.ok && err != nil {
			t.Errorf("%s: rejected: %v", c.name, err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "with another algorithm or secret")) {
			t.Errorf("%s: %v, want the clash reported", c.name, err)
		}
	}
}
