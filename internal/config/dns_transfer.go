package config

import (
	"encoding/base64"
	"fmt"
	"net/netip"
	"strings"
)

// DNSIdentity is spillway.dnsIdentity: what the DNS frontends answer to
// the CH-class TXT queries that name a server (RFC 4892). An empty field
// leaves its names REFUSED, as without the block.
type DNSIdentity struct {
	// Version answers version.bind. and version.server.
	Version string `json:"version,omitempty"`
	// ID answers id.server. and hostname.bind.
	ID string `json:"id,omitempty"`
}

// dnsIdentity validates spillway.dnsIdentity: each value is one TXT
// string.
func (v *validator) dnsIdentity() {
	if v.c.Spillway == nil || v.c.Spillway.DNSIdentity == nil {
		return
	}
	id := v.c.Spillway.DNSIdentity
	for _, f := range []struct{ path, val string }{{"spillway.dnsIdentity.version", id.Version}, {"spillway.dnsIdentity.id", id.ID}} {
		if len(f.val) > 255 {
			v.add(f.path, "shorten it to at most 255 bytes", "a TXT string holds at most 255 bytes, not %d", len(f.val))
		}
	}
}

// DNSTransfer is dnsZones[].transfer: zone transfers of the zone's static
// part (SOA, NS, records; never GSLB names) to secondary servers. A
// transfer is allowed when the client's address is in Allow (when Allow
// is set) and the request is signed with one of TSIGKeys (when TSIGKeys
// are set): with both, both are needed.
type DNSTransfer struct {
	// Allow lists the client subnets (or addresses) that may transfer.
	Allow []string `json:"allow,omitempty"`
	// TSIGKeys are the keys a transfer request may be signed with (RFC
	// 8945). NOTIFY messages are signed with the first.
	TSIGKeys []DNSTSIGKey `json:"tsigKeys,omitempty"`
	// Notify lists the secondaries ("ip" or "ip:port", port 53 by
	// default) told of a new serial (RFC 1996), at start and whenever a
	// reload changes soa.serial.
	Notify []string `json:"notify,omitempty"`
}

// DNSTSIGKey is one TSIG key.
type DNSTSIGKey struct {
	// Name is the key's name, a domain name, e.g. "xfr-key." (the name
	// secondaries are configured with).
	Name string `json:"name"`
	// Algorithm is one of tsigAlgorithms (default hmac-sha256).
	Algorithm string `json:"algorithm,omitempty"`
	// Secret is the key, base64; exactly one of Secret and SecretFile.
	Secret string `json:"secret,omitempty"`
	// SecretFile is the path of a file holding the base64 key (read when
	// the DNS server is built, at start and on every reload).
	SecretFile string `json:"secretFile,omitempty"`
}

// tsigAlgorithms are the values of tsigKeys[].algorithm (RFC 8945 §6).
var tsigAlgorithms = []string{"hmac-sha256", "hmac-sha384", "hmac-sha512", "hmac-sha224", "hmac-sha1"}

// DNSDefaultTSIGAlgorithm is tsigKeys[].algorithm when unset.
const DNSDefaultTSIGAlgorithm = "hmac-sha256"

// dnsTransfer validates a zone's transfer block.
func (v *validator) dnsTransfer(p string, t *DNSTransfer) {
	if t == nil {
		return
	}
	if len(t.Allow) == 0 && len(t.TSIGKeys) == 0 {
		v.add(p, "add allow: [SECONDARY/32] or tsigKeys: [{name: xfr-key., secret: BASE64}]", "nobody may transfer the zone")
	}
	for i, a := range t.Allow {
		if _, err := ParseTransferPrefix(a); err != nil {
			v.add(at("%s.allow[%d]", p, i), "write a subnet or an address, e.g. 192.0.2.0/24 or 2001:db8::53", "%v", err)
		}
	}
	names := map[string]int{}
	for i := range t.TSIGKeys {
		k := &t.TSIGKeys[i]
		kp := at("%s.tsigKeys[%d]", p, i)
		if v.dnsName(kp+".name", k.Name, "xfr-key.") {
			n := CanonicalDNSName(k.Name)
			if first, dup := names[n]; dup {
				v.add(kp+".name", "give each key its own name", "%q is already tsigKeys[%d]", n, first)
			}
			names[n] = i
		}
		v.enum(kp+".algorithm", k.Algorithm, tsigAlgorithms...)
		switch {
		case k.Secret != "" && k.SecretFile != "":
			v.add(kp, "keep either secret or secretFile", "secret and secretFile are exclusive")
		case k.Secret == "" && k.SecretFile == "":
			v.add(kp+".secret", "give the base64 key (e.g. from `tsig-keygen`), or secretFile: PATH", "a secret is required")
		case k.Secret != "":
			if _, err := DecodeTSIGSecret(k.Secret); err != nil {
				v.add(kp+".secret", "write the key in base64, e.g. as `tsig-keygen` prints it", "%v", err)
			}
		}
	}
	for i, n := range t.Notify {
		if _, err := ParseNotifyTarget(n); err != nil {
			v.add(at("%s.notify[%d]", p, i), "write a secondary's address, e.g. 192.0.2.53 or 192.0.2.53:5353", "%v", err)
		}
	}
}

// tsigAlgorithm is k's algorithm, the default when unset.
func tsigAlgorithm(k DNSTSIGKey) string {
	if k.Algorithm == "" {
		return DNSDefaultTSIGAlgorithm
	}
	return k.Algorithm
}

// tsigKeyClashes reports a TSIG key name given different algorithms or
// secrets in two zones: the server knows a key by its name.
func (v *validator) tsigKeyClashes() {
	type seen struct {
		path string
		key  DNSTSIGKey
	}
	keys := map[string]seen{}
	for i := range v.c.DNSZones {
		t := v.c.DNSZones[i].Transfer
		if t == nil {
			continue
		}
		for j, k := range t.TSIGKeys {
			n := CanonicalDNSName(k.Name)
			kp := at("dnsZones[%d].transfer.tsigKeys[%d]", i, j)
			if prev, ok := keys[n]; !ok {
				keys[n] = seen{kp, k}
			} else if tsigAlgorithm(prev.key) != tsigAlgorithm(k) || prev.key.Secret != "" && k.Secret != "" && prev.key.Secret != k.Secret {
				// Secrets read from files are compared by the DNS
				// server, which reads them.
				if !strings.HasPrefix(prev.path, at("dnsZones[%d].", i)) {
					v.add(kp, "give the key another name, or the same algorithm and secret as "+prev.path,
						"key %q is already %s with another algorithm or secret", n, prev.path)
				}
			}
		}
	}
}

// ParseTransferPrefix parses an allow entry: a CIDR without host bits or
// a single address.
func ParseTransferPrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR", s)
		}
		if pfx.Masked() != pfx {
			return netip.Prefix{}, fmt.Errorf("%q has host bits set (%s is the subnet)", s, pfx.Masked())
		}
		return pfx, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q is not an address or a CIDR", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// ParseNotifyTarget parses a notify entry, "ip" or "ip:port" ("[v6]:port"),
// into an address and port (53 by default).
func ParseNotifyTarget(s string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		if ap.Port() == 0 {
			return netip.AddrPort{}, fmt.Errorf("%q has port 0", s)
		}
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.AddrPort{}, fmt.Errorf("%q is not an address or address:port", s)
	}
	return netip.AddrPortFrom(a.Unmap(), 53), nil
}

// DecodeTSIGSecret decodes a base64 TSIG secret (surrounding white space
// ignored, as in a secret file).
func DecodeTSIGSecret(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("the secret is not base64: %v", err)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("the secret is empty")
	}
	return b, nil
}
