package config

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
