package dnssec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Keys is a zone's key state with its private keys, by key tag.
type Keys struct {
	State KeyState
	Keys  map[uint16]*Key
}

// filePrefix is the file-name prefix of zone's files in a key directory:
// the zone without its trailing dot ("root" for the root zone).
func filePrefix(zone string) string {
	if zone == "." {
		return "root"
	}
	return strings.TrimSuffix(zone, ".")
}

// StateFile is the path of zone's key state in dir.
func StateFile(dir, zone string) string { return filepath.Join(dir, filePrefix(zone)+".keys.json") }

// lockWait bounds how long Roll waits for another holder of a key
// directory's lock; a lock older than lockStale is taken as left by a
// process that died.
const (
	lockWait  = 5 * time.Second
	lockStale = 30 * time.Second
)

// Roll brings zone's keys in dir to now under policy p (Step), writing a
// new key's private key file (PKCS #8 PEM, mode 0600) and the state when
// they change, and returns the keys. A lock file in dir serializes
// callers, processes on a shared directory included: the first to reach
// a rollover makes the key, the others read it. Keys dropped from the
// state have their files removed.
func Roll(dir, zone string, p Policy, now time.Time) (*Keys, error) {
	unlock, err := lockDir(dir, zone)
	if err != nil {
		return nil, err
	}
	defer unlock()
	st, err := readState(dir, zone)
	if err != nil {
		return nil, err
	}
	newKey := func(role string) (*Key, string, error) {
		for range 8 { // a key tag already in use (1 in 65,536): another key
			k, file, err := writeNewKey(dir, zone, role)
			if err != nil || !st.hasTag(k.DNSKEYFlags(zone, roleFlags(role)).KeyTag()) {
				return k, file, err
			}
			os.Remove(filepath.Join(dir, file))
		}
		return nil, "", errors.New("no free key tag")
	}
	next, _, err := Step(st, now, p, newKey)
	if err != nil {
		return nil, err
	}
	if err := writeState(dir, zone, st, next); err != nil {
		return nil, err
	}
	return loadKeys(dir, next)
}

// Load reads zone's keys in dir as they are, without advancing them.
func Load(dir, zone string) (*Keys, error) {
	st, err := readState(dir, zone)
	if err != nil {
		return nil, err
	}
	if len(st.Keys) == 0 {
		return nil, fmt.Errorf("%s holds no keys for %s (fix: start spillway serve, which makes them, or check keyDirectory)", dir, zone)
	}
	return loadKeys(dir, st)
}

func lockDir(dir, zone string) (func(), error) {
	path := filepath.Join(dir, filePrefix(zone)+".lock")
	deadline := time.Now().Add(lockWait)
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			f.Close()
			return func() { os.Remove(path) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("lock %s: %w (fix: keyDirectory must be a writable directory)", path, err)
		}
		if fi, err := os.Stat(path); err == nil && time.Since(fi.ModTime()) > lockStale {
			os.Remove(path)
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("lock %s held for over %s (fix: remove it if no spillway process is running)", path, lockWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readState(dir, zone string) (KeyState, error) {
	st := KeyState{Zone: zone}
	b, err := os.ReadFile(StateFile(dir, zone))
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: %w (fix: restore the file from a backup; removing it makes new keys, and the parent's DS must then change)", StateFile(dir, zone), err)
	}
	if st.Zone != zone {
		return st, fmt.Errorf("%s is the key state of zone %q, not %q (fix: give each zone its own keyDirectory files)", StateFile(dir, zone), st.Zone, zone)
	}
	return st, nil
}

// writeState writes next when it differs from old (atomically: a
// temporary file renamed), and removes the files of keys next dropped.
func writeState(dir, zone string, old, next KeyState) error {
	ob, _ := json.MarshalIndent(old, "", "  ")
	nb, err := json.MarshalIndent(next, "", "  ")
	if err != nil {
		return err
	}
	if bytes.Equal(ob, nb) {
		return nil
	}
	path := StateFile(dir, zone)
	if err := os.WriteFile(path+".tmp", append(nb, '\n'), 0o600); err != nil {
		return err
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return err
	}
	kept := map[string]bool{}
	for _, k := range next.Keys {
		kept[k.File] = true
	}
	for _, k := range old.Keys {
		if !kept[k.File] {
			os.Remove(filepath.Join(dir, k.File))
		}
	}
	return nil
}

// writeNewKey makes a key of role for zone and writes it to dir as
// K<zone>+013+<tag>.<role>.pem.
func writeNewKey(dir, zone, role string) (*Key, string, error) {
	k, err := Generate()
	if err != nil {
		return nil, "", err
	}
	tag := k.DNSKEYFlags(zone, roleFlags(role)).KeyTag()
	name := fmt.Sprintf("K%s+%03d+%05d.%s.pem", filePrefix(zone), dns.ECDSAP256SHA256, tag, strings.ToLower(role))
	pemBytes, err := k.PEM()
	if err != nil {
		return nil, "", err
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("write %s: %w (fix: keyDirectory must be writable; a key tag that is taken is retried on the next check)", name, err)
	}
	if _, err := f.Write(pemBytes); err != nil {
		f.Close()
		return nil, "", err
	}
	return k, name, f.Close()
}

func loadKeys(dir string, st KeyState) (*Keys, error) {
	ks := &Keys{State: st, Keys: map[uint16]*Key{}}
	for _, kt := range st.Keys {
		k, err := LoadKey(filepath.Join(dir, kt.File))
		if err != nil {
			return nil, fmt.Errorf("%s key %d: %w", kt.Role, kt.Tag, err)
		}
		ks.Keys[kt.Tag] = k
	}
	return ks, nil
}

// DNSKEY returns key kt's DNSKEY record at zone.
func (ks *Keys) DNSKEY(kt *KeyTiming) *dns.DNSKEY {
	return ks.Keys[kt.Tag].DNSKEYFlags(ks.State.Zone, roleFlags(kt.Role))
}

// roleFlags is the DNSKEY flags of a key of role.
func roleFlags(role string) uint16 {
	if role == RoleZSK {
		return ZSKFlags
	}
	return Flags
}

// hasTag reports whether a key of st has tag.
func (st *KeyState) hasTag(tag uint16) bool {
	for _, k := range st.Keys {
		if k.Tag == tag {
			return true
		}
	}
	return false
}
