package gslb

import (
	"bytes"
	"crypto/ecdsa"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/dnssec"
	"github.com/spillwaylb/spillway/internal/rrl"
)

// Signature timing. Signatures are made per answer set, online, and
// reused from the cache for sigReuse; each is valid from sigBackdate
// before it was made (for resolvers whose clocks lag) to sigValidity
// after, so a cached signature always has at least sigValidity−sigReuse
// (6 days) to run, longer than any TTL Spillway serves.
const (
	sigBackdate = time.Hour
	sigValidity = 7 * 24 * time.Hour
	sigReuse    = 24 * time.Hour
)

// sigCacheSize bounds the signature cache of one zone (entries). Each
// entry is its answer set in wire form (the key) and an RRSIG: well under
// 1 KiB, so a full cache is a few MiB.
const sigCacheSize = 1 << 13

// maxCachedSet is the most records a set may have to be cached; larger
// sets (rare: answerCount is small) are signed on every query.
const maxCachedSet = 16

// signer signs the answers of one zone with its keys. It is built by New
// and dropped with its Server, so a reload re-reads the keys and starts
// with an empty cache.
type signer struct {
	zone string
	// zsk signs every set but DNSKEY, CDS and CDNSKEY, which every key
	// of ksks signs (both KSKs during a KSK rollover). A combined key
	// (keyFile) is both.
	zsk   signingKey
	ksks  []signingKey
	cache sigCache
	bufs  sync.Pool // *[]byte, scratch for cache keys
	// keys is the managed key state (keyDirectory), nil for a keyFile.
	keys *zoneKeys
	// hits and misses count signatures taken from the cache and made
	// (Stats; nil without one).
	hits, misses *atomic.Uint64
}

// signingKey is a private key and its DNSKEY's key tag.
type signingKey struct {
	key *ecdsa.PrivateKey
	tag uint16
}

// enableDNSSEC reads zone i's key, when it has one that is not disabled,
// and publishes its DNSKEY at the apex; managed keys (keyDirectory) are
// brought to now first (dnssec_keys.go).
func (z *zone) enableDNSSEC(cz *config.DNSZone, i int, now time.Time) error {
	d := cz.DNSSEC
	if d == nil || d.Disabled {
		return nil
	}
	if d.KeyDirectory != "" {
		return z.enableManagedKeys(cz, i, now)
	}
	k, err := dnssec.LoadKey(d.KeyFile)
	if err != nil {
		return fmt.Errorf("gslb: dnsZones[%d].dnssec.keyFile %s: %w", i, d.KeyFile, err)
	}
	dk := k.DNSKEY(z.origin)
	z.nodes[z.origin].rrsets[dns.TypeDNSKEY] = []dns.RR{dk}
	csk := signingKey{key: k.Private, tag: dk.KeyTag()}
	z.newSigner(csk, []signingKey{csk})
	return nil
}

// newSigner makes z's signer.
func (z *zone) newSigner(zsk signingKey, ksks []signingKey) {
	z.signer = &signer{zone: z.origin, zsk: zsk, ksks: ksks}
	z.signer.cache.init(sigCacheSize)
	z.signer.bufs.New = func() any { b := make([]byte, 0, 512); return &b }
}

// sign adds DNSSEC records to reply m of a signed zone, for a query with
// DO set: an RRSIG after every record set of the answer and authority
// sections, and for a negative answer (m.Ns holds the SOA) a compact
// denial of existence (RFC 9824): an NSEC at name, the name the answer
// ended at, whose next name is its immediate successor \000.name, so it
// covers no other name. n is name's node, nil when name does not exist:
// the NSEC's types are then NXNAME, RRSIG and NSEC, and the RCODE is
// NOERROR unless the query set the CO flag (RFC 9824 §5), which gets
// NXDOMAIN back and CO set in the reply. Additional-section addresses
// (name server addresses) are not signed.
//
// A query for type NSEC gets the NSEC itself as its answer (with no SOA),
// as compact-denial servers answer it: a NODATA proved by an NSEC whose
// bitmap has NSEC would contradict itself.
//
// A denial whose NSEC signature is not cached takes a token from gate
// first (nil: no cap); without one, sign returns false, m half signed:
// the caller replaces it (overSignatureCap).
func (sg *signer) sign(m *dns.Msg, opt *dns.OPT, co bool, name string, n *node, now time.Time, gate *rrl.Bucket) bool {
	if co {
		opt.SetCo()
	}
	m.Answer = sg.signSection(m.Answer, now)
	if len(m.Ns) == 0 {
		return true
	}
	if m.Ns[0].Header().Rrtype == dns.TypeNS {
		m.Ns = sg.signReferral(m.Ns, now)
		return true
	}
	soa := m.Ns[0]
	if !successorFits(name) {
		// \000.name would pass the 255-octet limit (a name of 254 or
		// 255 octets): no compact denial, the SOA alone is signed and
		// validators find the answer bogus. Only made-up names get here.
		m.Ns = sg.signSection(m.Ns, now)
		return true
	}
	nsec := &dns.NSEC{
		// RFC 9077: the NSEC TTL is that of negative caching, the SOA's.
		Hdr:        dns.RR_Header{Name: name, Rrtype: dns.TypeNSEC, Class: dns.ClassINET, Ttl: soa.Header().Ttl},
		NextDomain: `\000.` + name,
	}
	qt := m.Question[0].Qtype
	nsec.TypeBitMap = denialTypes(n, qt)
	if !sg.mayMint(nsec, gate, now) {
		return false
	}
	if n == nil && m.Rcode == dns.RcodeNameError && !co {
		m.Rcode = dns.RcodeSuccess
	}
	if qt == dns.TypeNSEC && len(m.Answer) == 0 {
		m.Answer, m.Ns = sg.signSection([]dns.RR{nsec}, now), nil
		return true
	}
	m.Ns = sg.signSection(append(m.Ns, nsec), now)
	return true
}

// signReferral signs the authority section of a referral (RFC 4035
// §3.1.4): the NS set at the cut belongs to the child and stays unsigned;
// the DS set is signed, and without one an NSEC at the cut (types NS,
// RRSIG, NSEC) proves the delegation insecure.
func (sg *signer) signReferral(rrs []dns.RR, now time.Time) []dns.RR {
	var ns, ds []dns.RR
	for _, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeDS {
			ds = append(ds, rr)
		} else {
			ns = append(ns, rr)
		}
	}
	if len(ds) > 0 {
		return append(ns, sg.signSection(ds, now)...)
	}
	cut := ns[0].Header().Name
	if !successorFits(cut) {
		return ns
	}
	nsec := &dns.NSEC{
		Hdr:        dns.RR_Header{Name: cut, Rrtype: dns.TypeNSEC, Class: dns.ClassINET, Ttl: ns[0].Header().Ttl},
		NextDomain: `\000.` + cut,
		TypeBitMap: []uint16{dns.TypeNS, dns.TypeRRSIG, dns.TypeNSEC},
	}
	return append(ns, sg.signSection([]dns.RR{nsec}, now)...)
}

// denialTypes returns the NSEC bitmap that denies qtype at a name whose
// node is n: for a name that does not exist (n nil) RRSIG, NSEC and
// NXNAME (RFC 9824 §3.2), else n's types (nodeTypes). For an explicit
// RRSIG query it leaves RRSIG out: such a NODATA is given only where the
// name has no record set to show signatures of, and validators reject a
// NODATA whose NSEC lists the type asked for.
func denialTypes(n *node, qtype uint16) []uint16 {
	var ts []uint16
	if n == nil {
		ts = []uint16{dns.TypeRRSIG, dns.TypeNSEC, dns.TypeNXNAME}
	} else {
		ts = nodeTypes(n)
	}
	if qtype == dns.TypeRRSIG {
		ts = slices.DeleteFunc(ts, func(t uint16) bool { return t == dns.TypeRRSIG })
	}
	return ts
}

// nodeTypes returns the types at n for its NSEC bitmap, sorted: its
// record sets, CNAME, the address families of a GSLB name, and RRSIG and
// NSEC.
func nodeTypes(n *node) []uint16 {
	ts := setTypes(n, 3)
	if n.cname != nil {
		ts = append(ts, dns.TypeCNAME)
	}
	ts = append(ts, dns.TypeRRSIG, dns.TypeNSEC)
	slices.Sort(ts)
	return slices.Compact(ts)
}

// setTypes returns the types of n's record sets, a GSLB name's address
// families included, sorted, in a slice with room for extra more.
func setTypes(n *node, extra int) []uint16 {
	ts := make([]uint16, 0, len(n.rrsets)+2+extra)
	for t := range n.rrsets {
		ts = append(ts, t)
	}
	if g := n.gslb; g != nil && g.has4 {
		ts = append(ts, dns.TypeA)
	}
	if g := n.gslb; g != nil && g.has6 {
		ts = append(ts, dns.TypeAAAA)
	}
	slices.Sort(ts)
	return ts
}

// signatures returns answer with every record set but CNAMEs replaced by
// its RRSIG: the answer to an explicit RRSIG query (a CNAME chain on the
// way stays, and is signed like any answer when the query set DO).
func (sg *signer) signatures(answer []dns.RR, now time.Time) []dns.RR {
	out := answer[:0:0]
	for start := 0; start < len(answer); {
		h := answer[start].Header()
		end := start + 1
		for end < len(answer) && answer[end].Header().Rrtype == h.Rrtype && answer[end].Header().Name == h.Name {
			end++
		}
		if h.Rrtype == dns.TypeCNAME {
			out = append(out, answer[start:end]...)
		} else {
			out = sg.appendSigs(out, answer[start:end], now)
		}
		start = end
	}
	return out
}

// signSection returns rrs with an RRSIG after each record set (a run of
// records of one owner and type; the handler appends sets whole).
func (sg *signer) signSection(rrs []dns.RR, now time.Time) []dns.RR {
	if len(rrs) == 0 {
		return rrs
	}
	out := make([]dns.RR, 0, len(rrs)+4)
	for start := 0; start < len(rrs); {
		h := rrs[start].Header()
		end := start + 1
		for end < len(rrs) && rrs[end].Header().Rrtype == h.Rrtype && rrs[end].Header().Name == h.Name {
			end++
		}
		out = append(out, rrs[start:end]...)
		if h.Rrtype != dns.TypeRRSIG {
			// (The answer to an RRSIG query: signatures are not signed.)
			out = sg.appendSigs(out, rrs[start:end], now)
		}
		start = end
	}
	return out
}

// appendSigs appends set's RRSIGs to out: the ZSK's, or for the DNSKEY,
// CDS and CDNSKEY sets every KSK's.
func (sg *signer) appendSigs(out, set []dns.RR, now time.Time) []dns.RR {
	switch set[0].Header().Rrtype {
	case dns.TypeDNSKEY, dns.TypeCDS, dns.TypeCDNSKEY:
		for _, k := range sg.ksks {
			if sig := sg.signSet(k, set, now); sig != nil {
				out = append(out, sig)
			}
		}
		return out
	}
	if sig := sg.signSet(sg.zsk, set, now); sig != nil {
		out = append(out, sig)
	}
	return out
}

// signSet returns the RRSIG of set by key k, from the cache when a
// signature of the same set by k made less than sigReuse ago is there.
// nil when it cannot be signed (a key that does not sign: not expected).
func (sg *signer) signSet(k signingKey, set []dns.RR, now time.Time) *dns.RRSIG {
	bp := sg.bufs.Get().(*[]byte)
	defer sg.bufs.Put(bp)
	key, ok := sigKey(bp, k, set)
	t := now.Unix()
	if ok {
		if sig, hit := sg.cached(key, t); hit {
			if sg.hits != nil {
				sg.hits.Add(1)
			}
			return sig
		}
	}
	if sg.misses != nil {
		sg.misses.Add(1)
	}
	h := set[0].Header()
	sig := &dns.RRSIG{
		Hdr:        dns.RR_Header{Name: h.Name, Rrtype: dns.TypeRRSIG, Class: dns.ClassINET, Ttl: h.Ttl},
		Algorithm:  dns.ECDSAP256SHA256,
		SignerName: sg.zone,
		KeyTag:     k.tag,
		Inception:  uint32(now.Add(-sigBackdate).Unix()),
		Expiration: uint32(now.Add(sigValidity).Unix()),
	}
	if err := sig.Sign(k.key, set); err != nil {
		return nil
	}
	if ok {
		sg.cache.put(key, sigEntry{sig: sig, made: t})
	}
	return sig
}

// cached returns the signature cached for the set whose key is key, when
// it was made less than sigReuse before t (Unix seconds).
// sigKey is the signature cache's key for set signed by k: setKey's,
// then k's tag.
func sigKey(bp *[]byte, k signingKey, set []dns.RR) ([]byte, bool) {
	key, ok := setKey(bp, set)
	if !ok {
		return nil, false
	}
	// setKey leaves room after the key (the message headers it does not
	// copy), so this does not reallocate.
	return append(key, byte(k.tag>>8), byte(k.tag)), true
}

// cached returns the cached signature under key while it may be reused at t.
func (sg *signer) cached(key []byte, t int64) (*dns.RRSIG, bool) {
	if e, hit := sg.cache.get(key); hit && t >= e.made && t < e.made+int64(sigReuse/time.Second) {
		return e.sig, true
	}
	return nil, false
}

// setKey writes set's cache key to the scratch buffer *bp (growing it)
// and returns it: the records in wire form (owner, type, class, TTL and
// data), sorted, so that the same set in another order is the same key.
// ok is false for sets too large to cache or that do not pack. Records
// are packed as one-record messages: dns.PackRR would write each
// record's Rdlength, and the records are shared by concurrent queries.
func setKey(bp *[]byte, set []dns.RR) (key []byte, ok bool) {
	if len(set) > maxCachedSet {
		return nil, false
	}
	total := 0
	for _, rr := range set {
		total += dns.Len(rr) + msgHeaderSize + 1 // PackBuffer wants one octet spare
	}
	buf := slices.Grow((*bp)[:0], 2*total)[:2*total]
	*bp = buf[:0]
	var recs [maxCachedSet][]byte
	var one dns.Msg
	off := 0
	for i := range set {
		one.Answer = set[i : i+1]
		out, err := one.PackBuffer(buf[off:total])
		if err != nil || len(out) == 0 || &out[0] != &buf[off] {
			return nil, false // did not fit where dns.Len said it would
		}
		end := off + len(out)
		// Insertion sort: sets are small.
		r, j := buf[off+msgHeaderSize:end], i
		for ; j > 0 && bytes.Compare(recs[j-1], r) > 0; j-- {
			recs[j] = recs[j-1]
		}
		recs[j] = r
		off = end
	}
	key = buf[total:total]
	for _, r := range recs[:len(set)] {
		key = append(key, r...)
	}
	return key, true
}

// sigEntry is a cached signature and when it was made (Unix seconds).
type sigEntry struct {
	sig  *dns.RRSIG
	made int64
}

// sigCache is a bounded map from answer set to signature, with two
// generations: when the current one holds half the bound it becomes the
// old one and the older is dropped; a hit in the old generation moves
// the entry back to the current one. So sets in use stay cached whatever
// else passes through (random names of a denial flood, for example).
type sigCache struct {
	mu       sync.Mutex
	half     int
	cur, old map[string]sigEntry
}

func (c *sigCache) init(size int) {
	c.half = max(size/2, 1)
	c.cur = make(map[string]sigEntry)
}

func (c *sigCache) get(key []byte) (sigEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.cur[string(key)]; ok {
		return e, true
	}
	if e, ok := c.old[string(key)]; ok {
		delete(c.old, string(key))
		c.putLocked(key, e)
		return e, true
	}
	return sigEntry{}, false
}

func (c *sigCache) put(key []byte, e sigEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(key, e)
}

func (c *sigCache) putLocked(key []byte, e sigEntry) {
	if len(c.cur) >= c.half {
		c.old, c.cur = c.cur, make(map[string]sigEntry, c.half)
	}
	c.cur[string(key)] = e
}

// successorFits reports whether \000.name, name's immediate successor in
// canonical order, is within the 255-octet limit of a name on the wire.
func successorFits(name string) bool {
	var buf [256]byte
	off, err := dns.PackDomainName(name, buf[:], 0, nil, false)
	return err == nil && off+2 <= 255
}

// msgHeaderSize is the size of a DNS message header (RFC 1035 §4.1.1).
const msgHeaderSize = 12
