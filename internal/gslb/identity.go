package gslb

import (
	"strings"

	"github.com/miekg/dns"
)

// chaos answers a CH-class query for the server's identity (RFC 4892:
// version.bind., version.server., id.server., hostname.bind.) when
// spillway.dnsIdentity configures it, and reports whether it did; other
// CH queries stay REFUSED, as every class but IN is.
func (s *Server) chaos(m *dns.Msg, q dns.Question) bool {
	name := strings.ToLower(q.Name)
	var val string
	switch name {
	case "version.bind.", "version.server.":
		val = s.idVersion
	case "id.server.", "hostname.bind.":
		val = s.idID
	}
	if val == "" {
		return false
	}
	m.Authoritative = true
	if q.Qtype == dns.TypeTXT || q.Qtype == dns.TypeANY {
		m.Answer = append(m.Answer, &dns.TXT{
			Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassCHAOS},
			Txt: []string{val},
		})
	}
	return true
}
