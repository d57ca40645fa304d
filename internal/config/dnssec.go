package config

// DNSZoneDNSSEC is dnsZones[].dnssec, a Spillway extension: the zone's
// answers are signed online, per query, with one ECDSA P-256 key
// (DNSSEC algorithm 13) used as a combined signing key (DNSKEY flags
// 257), and names and types that do not exist are denied with compact
// denial of existence (RFC 9824).
//
// With KeyDirectory instead of KeyFile, keys are managed: a KSK and a
// ZSK, made in the directory, the ZSK rolled every ZSKLifetimeSec by
// pre-publication and the KSK every KSKLifetimeSec (when set) with CDS
// and CDNSKEY for the parent (internal/dnssec rollover.go).
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
	// KeyDirectory holds the zone's managed keys and their state
	// (exclusive with KeyFile); it must be writable.
	KeyDirectory string `json:"keyDirectory,omitempty"`
	// ZSKLifetimeSec is how long a ZSK signs (default
	// DNSDefaultZSKLifetimeSec).
	ZSKLifetimeSec *int `json:"zskLifetimeSec,omitempty"`
	// KSKLifetimeSec is how long a KSK is the parent's DS key before it
	// is rolled (default 0: not rolled automatically).
	KSKLifetimeSec *int `json:"kskLifetimeSec,omitempty"`
	// PropagationDelaySec is how long a change takes to reach every
	// server of the zone (default DNSDefaultPropagationDelaySec).
	PropagationDelaySec *int `json:"propagationDelaySec,omitempty"`
	// ParentDelaySec is how long after the CDS names a new KSK the old
	// one is removed: the parent's pick-up time plus its DS TTL (default
	// DNSDefaultParentDelaySec).
	ParentDelaySec *int `json:"parentDelaySec,omitempty"`
}

// Defaults of the managed-key fields of dnsZones[].dnssec.
const (
	DNSDefaultZSKLifetimeSec      = 30 * 86400
	DNSDefaultPropagationDelaySec = 3600
	DNSDefaultParentDelaySec      = 2 * 86400
)

// dnssec validates dnsZones[].dnssec. The key file itself is read by the
// DNS server (and spillway dnssec ds), which name this field in their
// errors.
func (v *validator) dnssec(p string, d *DNSZoneDNSSEC) {
	if d == nil {
		return
	}
	switch {
	case d.KeyFile != "" && d.KeyDirectory != "":
		v.add(p+".keyDirectory", "keep keyFile (one combined key you manage) or keyDirectory (managed KSK and ZSK with rollover)",
			"keyFile and keyDirectory are exclusive")
	case d.KeyFile == "" && d.KeyDirectory == "":
		v.add(p+".keyFile", "set keyFile to an ECDSA P-256 private key, e.g. one written by spillway dnssec keygen --zone ZONE --out ZONE.key, or keyDirectory to a writable directory for managed keys",
			"a signed zone needs a key file")
	case d.KeyFile != "":
		for _, f := range []struct {
			name string
			set  bool
		}{{"zskLifetimeSec", d.ZSKLifetimeSec != nil}, {"kskLifetimeSec", d.KSKLifetimeSec != nil},
			{"propagationDelaySec", d.PropagationDelaySec != nil}, {"parentDelaySec", d.ParentDelaySec != nil}} {
			if f.set {
				v.add(p+"."+f.name, "use keyDirectory for managed keys, or remove "+f.name, "%s only applies to keyDirectory", f.name)
			}
		}
	}
	prop := DNSDefaultPropagationDelaySec
	if d.PropagationDelaySec != nil {
		prop = *d.PropagationDelaySec
	}
	v.intRange(p+".propagationDelaySec", d.PropagationDelaySec, 0, 30*86400)
	v.intRange(p+".parentDelaySec", d.ParentDelaySec, 0, 365*86400)
	// A lifetime must outlast the wait for its successor's DNSKEY (the
	// DNSKEY TTL, 3600 s, plus propagation), twice over.
	least := 2 * (3600 + prop)
	v.intRange(p+".zskLifetimeSec", d.ZSKLifetimeSec, least, 10*365*86400)
	if d.KSKLifetimeSec != nil && *d.KSKLifetimeSec != 0 {
		v.intRange(p+".kskLifetimeSec", d.KSKLifetimeSec, least, 20*365*86400)
	}
}
