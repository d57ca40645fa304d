package config

import (
	"strings"

	"github.com/miekg/dns"
)

// rrdataFixMore is rrdataFix for the record types added with delegations
// and reverse zones.
func rrdataFixMore(typ string) string {
	switch typ {
	case "CAA":
		return `write FLAGS TAG "VALUE", e.g. "0 issue \"letsencrypt.org\""`
	case "PTR":
		return `write a domain name, e.g. "www.example.com."`
	case "NS":
		return `write a name server's domain name, e.g. "ns1.sub.example.com."`
	}
	return `write KEYTAG ALGORITHM DIGESTTYPE DIGEST, e.g. "12345 13 2 <64 hex digits>"`
}

// IsWildcardDNSName reports whether a canonical owner name is a wildcard
// (RFC 4592: "*" as its leftmost label).
func IsWildcardDNSName(name string) bool { return strings.HasPrefix(name, "*.") }

// dnsCut is a delegation inside a zone: the owner of an NS record set
// below the apex, and the record that makes it.
type dnsCut struct{ owner, path string }

// dnsCuts validates the records of zone z that delegate (NS below the
// apex) or belong to a delegation (DS at it, glue below it) and returns
// the zone's cuts. Below a cut only A and AAAA records (glue for the
// delegated zone's name servers) may be; at a cut only NS and DS (RFC
// 1034 §4.2.1: the data there and below belongs to the child zone).
func (v *validator) dnsCuts(z *DNSZone, recs []zoneRecord) []dnsCut {
	owners, cuts := v.dnsDelegations(z, recs)
	v.occludedRecords(recs, owners, cuts)
	v.nestedCuts(cuts)
	return cuts
}

// dnsDelegations returns the owner name of each of z's records ("" when
// it is invalid or outside the zone) and the delegations (NS record sets
// below the apex), reporting NS record sets at the apex or a wildcard.
func (v *validator) dnsDelegations(z *DNSZone, recs []zoneRecord) ([]string, []dnsCut) {
	zone := CanonicalDNSName(z.Name)
	var cuts []dnsCut
	owners := make([]string, len(recs))
	for j, zr := range recs {
		r := zr.r
		if r.Name == "" || (r.Name != "@" && !validOwnerSyntax(r.Name)) {
			continue
		}
		o := z.Owner(r.Name)
		if !InDNSZone(o, zone) {
			continue
		}
		owners[j] = o
		if r.Type != "NS" {
			continue
		}
		rp := zr.path
		switch {
		case o == zone:
			v.add(rp+".name", "list the apex's name servers in nameServers", "the apex's NS records are nameServers, not records")
		case IsWildcardDNSName(o):
			v.add(rp+".name", "delegate a name without \"*\" (RFC 4592 §4.2)", "a wildcard cannot be delegated")
		default:
			cuts = append(cuts, dnsCut{o, rp})
		}
	}
	return owners, cuts
}

// occludedRecords reports DS record sets that are not at a delegation and
// records at or below one that a delegation hides (only NS and DS at it,
// A and AAAA glue below it).
func (v *validator) occludedRecords(recs []zoneRecord, owners []string, cuts []dnsCut) {
	for j, zr := range recs {
		r, o := zr.r, owners[j]
		if o == "" {
			continue
		}
		rp := zr.path
		if r.Type == "DS" && !isCut(o, cuts) {
			v.add(rp+".type", "add an NS record set at "+o+" to delegate it, or remove the DS",
				"a DS record set belongs at a delegation; %s is not one", o)
			continue
		}
		if r.Type == "NS" || r.Type == "DS" {
			continue
		}
		for _, c := range cuts {
			switch {
			case o == c.owner:
				v.add(rp+".name", "remove the record: the delegated zone's servers answer for "+o,
					"%q is delegated by %s; only NS and DS record sets may be at a delegation", o, c.path)
			case strings.HasSuffix(o, "."+c.owner) && r.Type != "A" && r.Type != "AAAA":
				v.add(rp+".name", "remove the record: the delegated zone's servers answer for it (only A and AAAA glue may be below a delegation)",
					"%q is below the delegation of %s at %s", o, c.owner, c.path)
			default:
				continue
			}
			break
		}
	}
}

// nestedCuts reports delegations below another delegation.
func (v *validator) nestedCuts(cuts []dnsCut) {
	// A cut below another cut is occluded too.
	for _, c := range cuts {
		for _, d := range cuts {
			if strings.HasSuffix(c.owner, "."+d.owner) {
				v.add(c.path+".name", "remove the record: the delegated zone's servers answer for it",
					"%q is below the delegation of %s at %s", c.owner, d.owner, d.path)
				break
			}
		}
	}
}

// belowCut reports a GSLB name at or below one of cuts.
func (v *validator) belowCut(path, name string, cuts []dnsCut) {
	for _, c := range cuts {
		if name == c.owner || strings.HasSuffix(name, "."+c.owner) {
			v.add(path, "move the GSLB name out of the delegated zone, or remove the delegation",
				"%q is below the delegation of %s at %s", name, c.owner, c.path)
			return
		}
	}
}

// isCut reports whether name is one of cuts.
func isCut(name string, cuts []dnsCut) bool {
	for _, c := range cuts {
		if c.owner == name {
			return true
		}
	}
	return false
}

// validOwnerSyntax reports whether name is a domain name, or a wildcard
// ("*" or "*." and a domain name), as dnsOwner accepts.
func validOwnerSyntax(name string) bool {
	if rest, wild := strings.CutPrefix(name, "*"); wild {
		if rest == "" {
			return true
		}
		if rest[0] != '.' {
			return false
		}
		name = rest[1:]
	}
	_, ok := dns.IsDomainName(name)
	return ok && name != "" && !strings.ContainsAny(name, " \t*\\")
}
