package dnssec

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// bindPrivate writes k in BIND's private-key format, as dnssec-keygen
// does for algorithm 13.
func bindPrivate(k *Key) string {
	d := make([]byte, 32)
	k.Private.D.FillBytes(d)
	return "Private-key-format: v1.3\nAlgorithm: 13 (ECDSAP256SHA256)\nPrivateKey: " +
		base64.StdEncoding.EncodeToString(d) + "\nCreated: 20260101000000\n"
}

func TestParseKeyFormats(t *testing.T) {
	k, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := k.PEM()
	if err != nil {
		t.Fatal(err)
	}
	sec1der, err := x509.MarshalECPrivateKey(k.Private)
	if err != nil {
		t.Fatal(err)
	}
	sec1 := "-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n" +
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1der}))
	for name, data := range map[string]string{"pkcs8": string(pkcs8), "sec1": sec1, "bind": bindPrivate(k)} {
		got, err := ParseKey([]byte(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !got.Private.Equal(k.Private) {
			t.Fatalf("%s: parsed a different key", name)
		}
	}
}

// The BIND parser agrees with miekg/dns's (the reference), and the
// DNSKEY we derive is the one miekg derives from the same key.
func TestBINDKeyMatchesMiekg(t *testing.T) {
	k, _ := Generate()
	dk := k.DNSKEY("gslb.example.")
	ref, err := dk.ReadPrivateKey(strings.NewReader(bindPrivate(k)), "K.private")
	if err != nil {
		t.Fatal(err)
	}
	if !ref.(*ecdsa.PrivateKey).Equal(k.Private) {
		t.Fatal("miekg parsed a different key")
	}
	// miekg's own DNSKEY for a fresh key: compare encodings.
	ref2 := &dns.DNSKEY{Hdr: dns.RR_Header{Name: "gslb.example.", Rrtype: dns.TypeDNSKEY, Class: dns.ClassINET},
		Flags: Flags, Protocol: 3, Algorithm: dns.ECDSAP256SHA256}
	priv, err := ref2.Generate(256)
	if err != nil {
		t.Fatal(err)
	}
	ours := (&Key{Private: priv.(*ecdsa.PrivateKey)}).DNSKEY("gslb.example.")
	if ours.PublicKey != ref2.PublicKey || ours.KeyTag() != ref2.KeyTag() {
		t.Fatalf("DNSKEY %s, miekg %s", ours, ref2)
	}
	ds := (&Key{Private: priv.(*ecdsa.PrivateKey)}).DS("gslb.example.")
	if want := ref2.ToDS(dns.SHA256); ds.Digest != want.Digest || ds.KeyTag != want.KeyTag || ds.DigestType != 2 || ds.Algorithm != 13 {
		t.Fatalf("DS %s, want %s", ds, want)
	}
}

func TestParseKeyErrors(t *testing.T) {
	rsa := "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIGmE2T9n0k4xXxtT3b0K0N4Yb3sZ2yq0hV0ZpJgY8c6D\n-----END PRIVATE KEY-----\n"
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	der, _ := x509.MarshalECPrivateKey(p384)
	for _, c := range []struct{ data, want string }{
		{"", "not a PEM or BIND private key"},
		{"hello", "not a PEM or BIND private key"},
		{"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "no EC PRIVATE KEY"},
		{rsa, "not ECDSA"},
		{string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})), "not P-256"},
		{"Private-key-format: v1.3\nAlgorithm: 8 (RSASHA256)\n", `algorithm "8"`},
		{"Private-key-format: v1.3\nAlgorithm: 13 (ECDSAP256SHA256)\n", "no PrivateKey"},
		{"Private-key-format: v1.3\nAlgorithm: 13\nPrivateKey: AAAA\n", "3 octets"},
		{"Private-key-format: v1.3\nAlgorithm: 13\nPrivateKey: !!\n", "base64"},
		{"Private-key-format: v1.3\nAlgorithm: 13\nPrivateKey: " + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n", "generate a new key"},
	} {
		_, err := ParseKey([]byte(c.data))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "fix:") {
			t.Errorf("ParseKey(%.40q) = %v, want %q and a fix", c.data, err, c.want)
		}
	}
}

// FuzzParseKey: no input panics, and a key that parses signs and
// publishes a DNSKEY.
func FuzzParseKey(f *testing.F) {
	k, _ := Generate()
	p, _ := k.PEM()
	f.Add(p)
	f.Add([]byte(bindPrivate(k)))
	f.Add([]byte("Private-key-format: v1.3\nAlgorithm: 13\nPrivateKey: AAAA\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := ParseKey(data)
		if err != nil {
			return
		}
		if dk := k.DNSKEY("example."); dk.KeyTag() == 0 && dk.PublicKey == "" {
			t.Fatal("empty DNSKEY")
		}
	})
}
