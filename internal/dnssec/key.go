// Package dnssec holds Spillway's DNSSEC signing keys: ECDSA P-256 keys
// (DNSSEC algorithm 13, RFC 6605) read from PEM or BIND private-key
// files, the DNSKEY and DS records they publish, and key generation. The
// online signing of answers lives in internal/gslb.
package dnssec

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/miekg/dns"
)

// Flags is the DNSKEY flags field of Spillway's keys: 257, a combined
// signing key (CSK): Zone Key plus Secure Entry Point (RFC 4034 §2.1.1).
// The one key signs every record set, DNSKEY included, and the parent's
// DS points at it.
const Flags = 257

// DNSKEYTTL is the TTL of the DNSKEY record set Spillway serves.
const DNSKEYTTL = 3600

// Key is a zone's signing key.
type Key struct {
	// Private signs; its curve is P-256.
	Private *ecdsa.PrivateKey
}

// maxKeyFile bounds what ParseKey reads: a P-256 key in any of the
// accepted formats is well under 1 KiB.
const maxKeyFile = 64 << 10

// LoadKey reads a key file (see ParseKey).
func LoadKey(path string) (*Key, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseKey(data)
}

// ParseKey parses an ECDSA P-256 private key in one of these formats:
//   - PEM "EC PRIVATE KEY" (SEC 1, as openssl ecparam -genkey writes) or
//     "PRIVATE KEY" (PKCS #8, as openssl genpkey and spillway dnssec
//     keygen write);
//   - BIND's private-key format (the K<zone>.+013+<tag>.private file of
//     dnssec-keygen -a ECDSAP256SHA256): "Private-key-format: v1.x",
//     "Algorithm: 13 (ECDSAP256SHA256)", "PrivateKey: <base64>".
//
// Errors say what is wrong and how to make a usable key.
func ParseKey(data []byte) (*Key, error) {
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("key file is %d bytes, larger than any P-256 key (fix: point keyFile at the private key, e.g. one written by spillway dnssec keygen)", len(data))
	}
	trimmed := bytes.TrimSpace(data)
	switch {
	case bytes.HasPrefix(trimmed, []byte("-----BEGIN")):
		return parsePEM(trimmed)
	case bytes.HasPrefix(trimmed, []byte("Private-key-format:")):
		return parseBIND(trimmed)
	}
	return nil, errors.New("not a PEM or BIND private key (fix: use a PEM EC/PKCS #8 P-256 key, a BIND K*.private file of algorithm 13, or run spillway dnssec keygen)")
}

func parsePEM(data []byte) (*Key, error) {
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, errors.New("PEM holds no EC PRIVATE KEY or PRIVATE KEY block (fix: give the private key, not the certificate or public key)")
		}
		var k any
		var err error
		switch b.Type {
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(b.Bytes)
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "EC PARAMETERS":
			continue // openssl ecparam -genkey writes these first
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("PEM %s: %v (fix: give an unencrypted ECDSA P-256 key)", b.Type, err)
		}
		ek, ok := k.(*ecdsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("PEM %s is a %T, not ECDSA (fix: DNSSEC algorithm 13 needs an ECDSA P-256 key: spillway dnssec keygen)", b.Type, k)
		}
		if ek.Curve != elliptic.P256() {
			return nil, fmt.Errorf("ECDSA key is on curve %s, not P-256 (fix: DNSSEC algorithm 13 needs P-256: openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256)", ek.Curve.Params().Name)
		}
		return &Key{Private: ek}, nil
	}
}

func parseBIND(data []byte) (*Key, error) {
	var alg, priv string
	for line := range strings.SplitSeq(string(data), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Algorithm":
			alg, _, _ = strings.Cut(v, " ")
		case "PrivateKey":
			priv = v
		}
	}
	if alg != "13" {
		return nil, fmt.Errorf("BIND key of algorithm %q, not 13 (fix: dnssec-keygen -a ECDSAP256SHA256, or spillway dnssec keygen)", alg)
	}
	if priv == "" {
		return nil, errors.New("BIND key has no PrivateKey line (fix: give the .private file, not the .key file)")
	}
	d, err := base64.StdEncoding.DecodeString(priv)
	if err != nil {
		return nil, fmt.Errorf("BIND key PrivateKey: %v (fix: the value is base64 of 32 octets)", err)
	}
	if len(d) != 32 {
		return nil, fmt.Errorf("BIND key PrivateKey is %d octets, not 32 (fix: algorithm 13 keys are 32 octets)", len(d))
	}
	ek, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d)
	if err != nil {
		return nil, fmt.Errorf("BIND key PrivateKey: %v (fix: generate a new key)", err)
	}
	return &Key{Private: ek}, nil
}

// Generate makes a new P-256 key.
func Generate() (*Key, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return &Key{Private: k}, nil
}

// PEM returns the key as a PKCS #8 "PRIVATE KEY" PEM block.
func (k *Key) PEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.Private)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// DNSKEY returns the key's DNSKEY record at zone (canonical, with the
// trailing dot), as a combined signing key (Flags).
func (k *Key) DNSKEY(zone string) *dns.DNSKEY { return k.DNSKEYFlags(zone, Flags) }

// DNSKEYFlags returns the key's DNSKEY record at zone with the given
// flags: Flags (257) for a KSK or CSK, ZSKFlags (256) for a ZSK.
func (k *Key) DNSKEYFlags(zone string, flags uint16) *dns.DNSKEY {
	pub, err := k.Private.PublicKey.Bytes() // 0x04 || X || Y
	if err != nil || len(pub) != 65 {
		panic("dnssec: P-256 public key does not encode: " + fmt.Sprint(err))
	}
	return &dns.DNSKEY{
		Hdr:       dns.RR_Header{Name: zone, Rrtype: dns.TypeDNSKEY, Class: dns.ClassINET, Ttl: DNSKEYTTL},
		Flags:     flags,
		Protocol:  3,
		Algorithm: dns.ECDSAP256SHA256,
		// RFC 6605 §4: the public key is X || Y, 64 octets.
		PublicKey: base64.StdEncoding.EncodeToString(pub[1:]),
	}
}

// DS returns the DS record (digest type 2, SHA-256) the parent of zone
// publishes for the key.
func (k *Key) DS(zone string) *dns.DS {
	return k.DNSKEY(zone).ToDS(dns.SHA256)
}
