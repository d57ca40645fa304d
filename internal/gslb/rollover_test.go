package gslb_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/dnssec"
	"github.com/spillwaylb/spillway/internal/gslb"
)

// managedYAML is zoneYAML signed with managed keys in dir; extra adds
// dnssec fields.
func managedYAML(dir, extra string) string {
	return strings.Replace(zoneYAML, "  nameServers: [ns1.gslb.example.]\n",
		"  nameServers: [ns1.gslb.example.]\n  dnssec: {keyDirectory: "+dir+", propagationDelaySec: 3600"+extra+"}\n", 1)
}

// sigTags returns the key tags of the RRSIGs over qtype in rrs.
func sigTags(rrs []dns.RR, qtype uint16) []uint16 {
	var tags []uint16
	for _, rr := range rrs {
		if s, ok := rr.(*dns.RRSIG); ok && s.TypeCovered == qtype {
			tags = append(tags, s.KeyTag)
		}
	}
	slices.Sort(tags)
	return tags
}

// keyTags returns the tags of the DNSKEYs in rrs, sorted.
func keyTags(rrs []dns.RR) []uint16 {
	var tags []uint16
	for _, rr := range rrs {
		if k, ok := rr.(*dns.DNSKEY); ok {
			tags = append(tags, k.KeyTag())
		}
	}
	slices.Sort(tags)
	return tags
}

// delvRRs runs delv for name and type against addr from anchor and
// returns its records, failing unless it says "; fully validated".
func delvRRs(t *testing.T, delv, addr, anchor, name, qtype string) []dns.RR {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, delv, "@"+host, "-p", port, "-a", anchor, "+root=gslb.example.",
		"+dnssec", "+nomultiline", name, qtype).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "; fully validated") {
		t.Fatalf("delv %s %s: %v\n%s", name, qtype, err, out)
	}
	var rrs []dns.RR
	for line := range strings.SplitSeq(string(out), "\n") {
		if line == "" || strings.HasPrefix(line, ";") {
			continue
		}
		if rr, err := dns.NewRR(line); err == nil && rr != nil {
			rrs = append(rrs, rr)
		}
	}
	return rrs
}

// A full ZSK rollover by pre-publication (RFC 6781 §4.1.1.1), walked with
// the key clock advanced step by step, each step a server built at that
// time (as the server composer rebuilds it when KeysDue), and delv
// validating from the KSK's DS at every step: the new ZSK is published
// and not used; after the DNSKEY TTL plus propagation it signs and the
// old one stays published; after the longest TTL plus propagation the
// old one is removed. The KSK, and so the parent's DS, never changes.
func TestZSKRolloverDelv(t *testing.T) {
	delv := lookDelv(t)
	dir := t.TempDir()
	y := managedYAML(dir, ", zskLifetimeSec: 2592000")
	t0 := time.Now().Truncate(time.Second)
	at := t0
	opts := gslb.Options{KeyNow: func() time.Time { return at }}
	s := compile(t, y, opts)
	ks, err := dnssec.Load(dir, "gslb.example.")
	if err != nil {
		t.Fatal(err)
	}
	if len(ks.State.Keys) != 2 {
		t.Fatalf("a new zone should get a KSK and a ZSK: %+v", ks.State.Keys)
	}
	var ksk, zsk1 dnssec.KeyTiming
	for _, k := range ks.State.Keys {
		if k.Role == dnssec.RoleKSK {
			ksk = k
		} else {
			zsk1 = k
		}
	}
	ds := ks.DNSKEY(&ksk).ToDS(dns.SHA256)
	anchor := filepath.Join(t.TempDir(), "anchor.conf")
	conf := fmt.Sprintf("trust-anchors {\n\tgslb.example. static-ds %d %d %d \"%s\";\n};\n", ds.KeyTag, ds.Algorithm, ds.DigestType, ds.Digest)
	if err := os.WriteFile(anchor, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	life, wait := 30*24*time.Hour, 2*time.Hour // DNSKEY TTL 1 h + propagation 1 h
	maxTTL := time.Hour                        // the DNSKEY set's; the zone's records are shorter
	due := t0.Add(life - wait)
	var zsk2 uint16
	steps := []struct {
		name string
		at   time.Time
		// keys in the DNSKEY set and the ZSK that signs (0: the new one)
		published []string
		signer    string
		// due: the server of the step before says its keys are due.
		due bool
	}{
		{"start", t0, []string{"ksk", "zsk1"}, "zsk1", false},
		{"before the rollover is due", due.Add(-time.Second), []string{"ksk", "zsk1"}, "zsk1", false},
		{"new ZSK published", due, []string{"ksk", "zsk1", "zsk2"}, "zsk1", true},
		{"waiting for the DNSKEY TTL", due.Add(wait / 2), []string{"ksk", "zsk1", "zsk2"}, "zsk1", false},
		{"new ZSK signs, old one published", due.Add(wait), []string{"ksk", "zsk1", "zsk2"}, "zsk2", true},
		{"waiting for the zone's TTLs", due.Add(wait + maxTTL), []string{"ksk", "zsk1", "zsk2"}, "zsk2", false},
		{"old ZSK removed", due.Add(wait + maxTTL + time.Hour), []string{"ksk", "zsk2"}, "zsk2", true},
	}
	for _, st := range steps {
		at = st.at
		if got := s.KeysDue(at); got != st.due {
			t.Errorf("%s: the previous server's KeysDue is %v, want %v", st.name, got, st.due)
		}
		var addr string
		s, addr = start(t, y, opts)
		ks, err := dnssec.Load(dir, "gslb.example.")
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range ks.State.Keys {
			if k.Role == dnssec.RoleZSK && k.Tag != zsk1.Tag {
				zsk2 = k.Tag
			}
		}
		name := map[uint16]string{ksk.Tag: "ksk", zsk1.Tag: "zsk1", zsk2: "zsk2"}
		names := func(tags []uint16) []string {
			var out []string
			for _, tg := range tags {
				out = append(out, name[tg])
			}
			slices.Sort(out)
			return out
		}
		keys := delvRRs(t, delv, addr, anchor, "gslb.example.", "DNSKEY")
		if got := names(keyTags(keys)); !slices.Equal(got, st.published) {
			t.Errorf("%s: DNSKEY set %v, want %v", st.name, got, st.published)
		}
		if got := names(sigTags(keys, dns.TypeDNSKEY)); !slices.Equal(got, []string{"ksk"}) {
			t.Errorf("%s: DNSKEY set signed by %v, want the KSK", st.name, got)
		}
		for _, q := range []struct{ name, qtype string }{{"mail.gslb.example.", "A"}, {"w.gslb.example.", "A"}} {
			rrs := delvRRs(t, delv, addr, anchor, q.name, q.qtype)
			if got := names(sigTags(rrs, dns.TypeA)); !slices.Equal(got, []string{st.signer}) {
				t.Errorf("%s: %s signed by %v, want %s", st.name, q.name, got, st.signer)
			}
		}
		t.Logf("%s (%s after start): DNSKEY %v, signing ZSK %s", st.name, st.at.Sub(t0), st.published, st.signer)
	}
	if ks, _ := dnssec.Load(dir, "gslb.example."); len(ks.State.Keys) != 2 {
		t.Errorf("after the rollover the state holds %d keys, want 2", len(ks.State.Keys))
	}
	if _, err := os.Stat(filepath.Join(dir, zsk1.File)); !os.IsNotExist(err) {
		t.Errorf("the removed ZSK's file is still there: %v", err)
	}
}

// A KSK rollover with CDS and CDNSKEY (RFC 7344, RFC 8078): the new KSK
// is published and signs the DNSKEY set next to the old one; once its
// DNSKEY has reached validators the CDS and CDNSKEY sets name it instead
// of the old one (the parent's cue to change the DS); after parentDelay
// the old KSK leaves. At every phase the DNSKEY, CDS and CDNSKEY sets are
// signed by exactly the published KSKs, and the signatures verify.
func TestKSKRolloverCDS(t *testing.T) {
	dir := t.TempDir()
	y := managedYAML(dir, ", zskLifetimeSec: 31536000, kskLifetimeSec: 31536000, parentDelaySec: 172800")
	t0 := time.Now().Truncate(time.Second)
	at := t0
	opts := gslb.Options{KeyNow: func() time.Time { return at }}
	compile(t, y, opts)
	ks, err := dnssec.Load(dir, "gslb.example.")
	if err != nil {
		t.Fatal(err)
	}
	var ksk1 uint16
	for _, k := range ks.State.Keys {
		if k.Role == dnssec.RoleKSK {
			ksk1 = k.Tag
		}
	}
	due := t0.Add(365*24*time.Hour - 2*time.Hour)
	active := due.Add(2 * time.Hour)
	steps := []struct {
		name      string
		at        time.Time
		ksks, cds []string // published KSKs (and so the signers), the CDS's key
	}{
		{"start", t0, []string{"ksk1"}, []string{"ksk1"}},
		{"new KSK published", due, []string{"ksk1", "ksk2"}, []string{"ksk1"}},
		{"CDS names the new KSK", active, []string{"ksk1", "ksk2"}, []string{"ksk2"}},
		{"waiting for the parent", active.Add(24 * time.Hour), []string{"ksk1", "ksk2"}, []string{"ksk2"}},
		{"old KSK removed", active.Add(48 * time.Hour), []string{"ksk2"}, []string{"ksk2"}},
	}
	for _, st := range steps {
		at = st.at
		_, addr := start(t, y, opts)
		ks, err := dnssec.Load(dir, "gslb.example.")
		if err != nil {
			t.Fatal(err)
		}
		name := map[uint16]string{ksk1: "ksk1"}
		for _, k := range ks.State.Keys {
			if k.Role == dnssec.RoleKSK && k.Tag != ksk1 {
				name[k.Tag] = "ksk2"
			}
		}
		names := func(tags []uint16) []string {
			var out []string
			for _, tg := range tags {
				out = append(out, name[tg])
			}
			slices.Sort(out)
			return out
		}
		keys := exchange(t, "udp", addr, doQuery("gslb.example.", dns.TypeDNSKEY, false)).Answer
		var dnskeys []*dns.DNSKEY
		for _, rr := range keys {
			if k, ok := rr.(*dns.DNSKEY); ok {
				dnskeys = append(dnskeys, k)
			}
		}
		for _, qt := range []uint16{dns.TypeDNSKEY, dns.TypeCDS, dns.TypeCDNSKEY} {
			ans := exchange(t, "udp", addr, doQuery("gslb.example.", qt, false)).Answer
			if got := names(sigTags(ans, qt)); !slices.Equal(got, st.ksks) {
				t.Errorf("%s: %s signed by %v, want %v", st.name, dns.TypeToString[qt], got, st.ksks)
			}
			verifySigs(t, st.name, ans, dnskeys)
			var in []uint16
			for _, rr := range ans {
				switch r := rr.(type) {
				case *dns.CDS:
					in = append(in, r.KeyTag)
				case *dns.CDNSKEY:
					in = append(in, r.KeyTag())
				}
			}
			if qt != dns.TypeDNSKEY {
				if got := names(in); !slices.Equal(got, st.cds) {
					t.Errorf("%s: %s names %v, want %v", st.name, dns.TypeToString[qt], got, st.cds)
				}
			}
		}
	}
}

// verifySigs checks every RRSIG in ans over its set with the DNSKEY of
// its tag.
func verifySigs(t *testing.T, step string, ans []dns.RR, keys []*dns.DNSKEY) {
	t.Helper()
	for _, rr := range ans {
		sig, ok := rr.(*dns.RRSIG)
		if !ok {
			continue
		}
		var set []dns.RR
		for _, r := range ans {
			if r.Header().Rrtype == sig.TypeCovered {
				set = append(set, r)
			}
		}
		i := slices.IndexFunc(keys, func(k *dns.DNSKEY) bool { return k.KeyTag() == sig.KeyTag })
		if i < 0 {
			t.Errorf("%s: RRSIG %s by key %d, which is not in the DNSKEY set", step, dns.TypeToString[sig.TypeCovered], sig.KeyTag)
			continue
		}
		if err := sig.Verify(keys[i], set); err != nil {
			t.Errorf("%s: RRSIG %s by %d: %v", step, dns.TypeToString[sig.TypeCovered], sig.KeyTag, err)
		}
	}
}
