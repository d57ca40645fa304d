package gslb

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
)

// xfrChunk bounds the records of one transfer message, by their
// uncompressed size: many records per message (RFC 5936 §2.2) and far
// below the 64 KiB a TCP message can hold.
const xfrChunk = 16000

// xfr is a zone's transfer configuration and its static part, compiled
// once (immutable).
type xfr struct {
	soa *dns.SOA
	// chunks are the transfer's messages' records: the SOA first and
	// last (RFC 5936 §2.2), the static records between. GSLB names are
	// decided per query and are not transferred.
	chunks [][]dns.RR
	allow  []netip.Prefix
	keys   map[string]bool // key names that may transfer
	notify []netip.AddrPort
	// notifyKey signs NOTIFY messages ("" unsigned).
	notifyKey, notifyAlg string
}

// tsigKey is one TSIG key.
type tsigKey struct {
	alg    string // canonical: "hmac-sha256."
	secret []byte
}

// tsigKeys are the Server's TSIG keys by canonical name. It is the
// dns.TsigProvider of the TCP listeners (through Front) and of NOTIFY:
// unlike miekg's own provider it insists on the key's configured
// algorithm.
type tsigKeys map[string]tsigKey

// Generate implements dns.TsigProvider.
func (ks tsigKeys) Generate(msg []byte, t *dns.TSIG) ([]byte, error) {
	k, ok := ks[strings.ToLower(t.Hdr.Name)]
	if !ok {
		return nil, dns.ErrSecret
	}
	if dns.CanonicalName(t.Algorithm) != k.alg {
		return nil, dns.ErrKeyAlg
	}
	var h func() hash.Hash
	switch k.alg {
	case dns.HmacSHA256:
		h = sha256.New
	case dns.HmacSHA384:
		h = sha512.New384
	case dns.HmacSHA512:
		h = sha512.New
	case dns.HmacSHA224:
		h = sha256.New224
	case dns.HmacSHA1:
		h = sha1.New
	default:
		return nil, dns.ErrKeyAlg
	}
	mac := hmac.New(h, k.secret)
	mac.Write(msg)
	return mac.Sum(nil), nil
}

// Verify implements dns.TsigProvider.
func (ks tsigKeys) Verify(msg []byte, t *dns.TSIG) error {
	b, err := ks.Generate(msg, t)
	if err != nil {
		return err
	}
	mac, err := hex.DecodeString(t.MAC)
	if err != nil || !hmac.Equal(b, mac) {
		return dns.ErrSig
	}
	return nil
}

// compileTransfer compiles zone i's transfer block into z.xfr and adds its
// keys to keys (reading secret files).
func compileTransfer(z *zone, cz *config.DNSZone, i int, keys tsigKeys) error {
	t := cz.Transfer
	if t == nil {
		return nil
	}
	x := &xfr{keys: map[string]bool{}}
	x.soa = z.nodes[z.origin].rrsets[dns.TypeSOA][0].(*dns.SOA)
	for j, a := range t.Allow {
		p, err := config.ParseTransferPrefix(a)
		if err != nil {
			return fmt.Errorf("gslb: dnsZones[%d].transfer.allow[%d]: %w (fix: write a subnet or an address)", i, j, err)
		}
		x.allow = append(x.allow, p)
	}
	for j, n := range t.Notify {
		ap, err := config.ParseNotifyTarget(n)
		if err != nil {
			return fmt.Errorf("gslb: dnsZones[%d].transfer.notify[%d]: %w (fix: write ip or ip:port)", i, j, err)
		}
		x.notify = append(x.notify, ap)
	}
	for j, k := range t.TSIGKeys {
		path := fmt.Sprintf("dnsZones[%d].transfer.tsigKeys[%d]", i, j)
		secret := k.Secret
		if k.SecretFile != "" {
			b, err := os.ReadFile(k.SecretFile)
			if err != nil {
				return fmt.Errorf("gslb: %s.secretFile: %w (fix: give a readable file holding the base64 key)", path, err)
			}
			secret = string(b)
		}
		raw, err := config.DecodeTSIGSecret(secret)
		if err != nil {
			return fmt.Errorf("gslb: %s: %w (fix: write the key in base64, as tsig-keygen prints it)", path, err)
		}
		alg := k.Algorithm
		if alg == "" {
			alg = config.DNSDefaultTSIGAlgorithm
		}
		name := config.CanonicalDNSName(k.Name)
		key := tsigKey{alg: dns.CanonicalName(alg), secret: raw}
		if prev, ok := keys[name]; ok && (prev.alg != key.alg || !hmac.Equal(prev.secret, key.secret)) {
			return fmt.Errorf("gslb: %s: key %s has another algorithm or secret in another zone (fix: give it another name)", path, name)
		}
		keys[name] = key
		x.keys[name] = true
		if j == 0 {
			x.notifyKey, x.notifyAlg = name, key.alg
		}
	}
	x.chunks = z.staticChunks(x.soa)
	z.xfr = x
	return nil
}

// staticChunks returns z's static records for a transfer, split into
// messages: SOA first and last, then every other record set by owner
// name (the apex first) and type.
func (z *zone) staticChunks(soa *dns.SOA) [][]dns.RR {
	names := make([]string, 0, len(z.nodes))
	for name := range z.nodes {
		names = append(names, name)
	}
	z.sortApexFirst(names)
	rrs := []dns.RR{soa}
	for _, name := range names {
		n := z.nodes[name]
		if n.cname != nil {
			rrs = append(rrs, n.cname)
		}
		types := make([]uint16, 0, len(n.rrsets))
		for t := range n.rrsets {
			if t != dns.TypeSOA {
				types = append(types, t)
			}
		}
		slices.Sort(types)
		for _, t := range types {
			rrs = append(rrs, n.rrsets[t]...)
		}
	}
	return chunkRecords(append(rrs, soa))
}

// chunkRecords splits a transfer's records into messages of about
// xfrChunk octets (uncompressed).
func chunkRecords(rrs []dns.RR) [][]dns.RR {
	var chunks [][]dns.RR
	size, from := 0, 0
	for i, rr := range rrs {
		l := dns.Len(rr)
		if size+l > xfrChunk && i > from {
			chunks = append(chunks, rrs[from:i:i])
			size, from = 0, i
		}
		size += l
	}
	return append(chunks, rrs[from:])
}

// isTransfer reports whether r asks for a zone transfer over TCP, which
// serveTransfer answers (over UDP, and through Exchange, respond refuses
// it).
func isTransfer(r *dns.Msg, tcp bool) bool {
	if !tcp || r.Response || r.Opcode != dns.OpcodeQuery || len(r.Question) != 1 {
		return false
	}
	q := r.Question[0]
	return q.Qclass == dns.ClassINET && (q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR)
}

// serveTransfer answers an AXFR or IXFR over TCP (RFC 5936, RFC 1995):
// the zone's static part when src and the request's TSIG key are allowed
// by its transfer block, REFUSED otherwise, NOTAUTH for a name that is no
// served zone or a request whose TSIG does not verify (RFC 8945 §5.2,
// with the TSIG error; signed for BADTIME only). An IXFR from the current serial (or a
// newer one) gets the SOA alone; from any other, the whole zone, as RFC
// 1995 §4 allows a server without history.
func (s *Server) serveTransfer(w dns.ResponseWriter, r *dns.Msg, src netip.Addr) {
	q := r.Question[0]
	tsig := r.IsTsig()
	signed := tsig != nil && w.TsigStatus() == nil
	reply := func(rcode int, answer ...dns.RR) {
		m := new(dns.Msg)
		m.SetRcode(r, rcode)
		m.Authoritative = rcode == dns.RcodeSuccess
		m.Answer = answer
		if signed {
			m.SetTsig(tsig.Hdr.Name, tsig.Algorithm, tsig.Fudge, time.Now().Unix())
			_ = w.WriteMsg(m)
			return
		}
		if out, err := m.Pack(); err == nil {
			_, _ = w.Write(out)
		}
	}
	if tsig != nil && !signed {
		s.log.Info("gslb: zone transfer with a bad TSIG", "zone", q.Name, "client", src, "key", tsig.Hdr.Name, "err", w.TsigStatus())
		writeTSIGError(w, r, w.TsigStatus())
		return
	}
	z := s.zones[config.CanonicalDNSName(q.Name)]
	if z == nil {
		reply(dns.RcodeNotAuth)
		return
	}
	key := ""
	if signed {
		key = strings.ToLower(tsig.Hdr.Name)
	}
	if x := z.xfr; x == nil || !x.permits(src, key) {
		s.log.Info("gslb: zone transfer refused", "zone", z.origin, "client", src, "key", key)
		reply(dns.RcodeRefused)
		return
	}
	x := z.xfr
	if q.Qtype == dns.TypeIXFR && len(r.Ns) > 0 {
		if have, ok := r.Ns[0].(*dns.SOA); ok && int32(have.Serial-x.soa.Serial) >= 0 {
			reply(dns.RcodeSuccess, x.soa)
			return
		}
	}
	chunks := x.chunks
	if z.signer != nil {
		chunks = z.signedTransfer(x.soa, s.now()) // transfer_signed.go
	}
	ch := make(chan *dns.Envelope, len(chunks))
	for _, c := range chunks {
		ch <- &dns.Envelope{RR: c}
	}
	close(ch)
	if err := new(dns.Transfer).Out(w, r, ch); err != nil {
		s.log.Info("gslb: zone transfer failed", "zone", z.origin, "client", src, "err", err)
	}
}

// permits reports whether a client at src whose request was signed with
// key ("" unsigned) may transfer: it must be in allow when allow is set
// and have signed with one of the keys when keys are set.
func (x *xfr) permits(src netip.Addr, key string) bool {
	if len(x.allow) == 0 && len(x.keys) == 0 {
		return false
	}
	if len(x.allow) > 0 && !slices.ContainsFunc(x.allow, func(p netip.Prefix) bool { return p.Contains(src) }) {
		return false
	}
	return len(x.keys) == 0 || x.keys[key]
}

// compareNames orders names as a zone file lists them: by labels from
// the right (RFC 4034 §6.1 without the octet rules, which an order for
// readability does not need).
func compareNames(a, b string) int {
	la, lb := dns.SplitDomainName(a), dns.SplitDomainName(b)
	for i, j := len(la)-1, len(lb)-1; i >= 0 && j >= 0; i, j = i-1, j-1 {
		if c := strings.Compare(la[i], lb[j]); c != 0 {
			return c
		}
	}
	return len(la) - len(lb)
}
