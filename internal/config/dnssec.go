package config

// DNSZoneDNSSEC is dnsZones[].dnssec, a Spillway extension: the zone's
// answers are signed online, per query, with one ECDSA P-256 key
// (DNSSEC algorithm 13) used as a combined signing key (DNSKEY flags
// 257), and names and types that do not exist are denied with compact
// denial of existence (RFC 9824).
type DNSZoneDNSSEC struct {
	// KeyFile is the path of the private key: PEM (EC PRIVATE KEY or
	// PKCS #8 PRIVATE KEY) or a BIND K*.private file of algorithm 13.
	// It is read when the configuration is loaded and on every reload.
	// spillway dnssec keygen writes one.
	KeyFile string `json:"keyFile"`
	// Disabled keeps the key configured but serves the zone unsigned
	// (no DNSKEY, no RRSIG): the first step of going insecure, after the
	// parent's DS is removed.
	Disabled bool `json:"disabled,omitempty"`
}

// dnssec validates dnsZones[].dnssec. The key file itself is read by the
// DNS server (and spillway dnssec ds), which name this field in their
// errors.
func (v *validator) dnssec(p string, d *DNSZoneDNSSEC) {
	if d == nil {
		return
	}
	if d.KeyFile == "" {
		v.add(p+".keyFile", "set keyFile to an ECDSA P-256 private key, e.g. one written by spillway dnssec keygen --zone ZONE --out ZONE.key",
			"a signed zone needs a key file")
	}
}
