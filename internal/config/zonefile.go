package config

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// DNSZoneFile is dnsZones[].zoneFile, a Spillway extension: static
// records read from an RFC 1035 master file, next to (never merged with)
// the zone's YAML records. The file is read when the configuration is
// loaded and on every reload.
type DNSZoneFile struct {
	// Path is the master file; a relative path is taken from the working
	// directory, as dnssec.keyFile is.
	Path string `json:"path"`
	// IncludeRoot is the directory $INCLUDE may read from (default: the
	// directory of Path). Path must lie in it; an $INCLUDE that leaves it
	// (by "..", or a symbolic link pointing out) is refused, and an
	// absolute $INCLUDE path is taken from IncludeRoot as "/".
	IncludeRoot string `json:"includeRoot,omitempty"`
}

// Bounds of a zone file: what one may hold and how large its files may
// be together.
const (
	maxZoneFileRecords = 100000
	maxZoneFileBytes   = 64 << 20
)

// zoneFileData is what a zone's master file held, as the YAML would say
// it: record sets, and the apex SOA and NS when the file has them.
type zoneFileData struct {
	// records are the file's sets, in the order they first appear;
	// where[i] names records[i] in messages ("FILE: OWNER TYPE").
	records []DNSRecord
	where   []string
	// soa and nameServers are the apex SOA and NS set (nil when absent).
	soa         *DNSSOA
	nameServers []string
	// digest is the SHA-256 of every file read, in the order read;
	// files are their paths on disk (the master file, then $INCLUDEs).
	digest [32]byte
	files  []string
}

// StaticRecords returns the zone's static record sets: records[] and
// then the sets of zoneFile (loaded by Parse or Validate).
func (z *DNSZone) StaticRecords() []DNSRecord {
	if z.file == nil {
		return z.Records
	}
	return append(slices.Clip(z.Records), z.file.records...)
}

// ZoneSOA returns the zone's soa block, or the zone file's SOA when the
// YAML has none (nil: defaults).
func (z *DNSZone) ZoneSOA() *DNSSOA {
	if z.SOA == nil && z.file != nil {
		return z.file.soa
	}
	return z.SOA
}

// ZoneNameServers returns nameServers, or the zone file's apex NS set
// when the YAML has none.
func (z *DNSZone) ZoneNameServers() []string {
	if len(z.NameServers) == 0 && z.file != nil {
		return z.file.nameServers
	}
	return z.NameServers
}

// ZoneFiles returns the files zoneFile read (the master file and its
// $INCLUDEs, as paths on disk) and the SHA-256 of their contents; none
// without a zoneFile, or before it was loaded.
func (z *DNSZone) ZoneFiles() ([]string, [32]byte) {
	if z.file == nil {
		return nil, [32]byte{}
	}
	return z.file.files, z.file.digest
}

// loadZoneFile reads z's zoneFile (see DNSZoneFile). Errors name the file
// and, for a parse error, its line.
func loadZoneFile(zf *DNSZoneFile, origin string) (*zoneFileData, error) {
	root := zf.IncludeRoot
	if root == "" {
		root = filepath.Dir(zf.Path)
	}
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	absPath, err := filepath.Abs(zf.Path)
	if err != nil {
		return nil, err
	}
	rel, err := filepath.Rel(absRoot, absPath)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("%s is not inside includeRoot %s (fix: set includeRoot to a directory holding the zone file, or leave it out)", zf.Path, root)
	}
	r, err := os.OpenRoot(absRoot)
	if err != nil {
		return nil, fmt.Errorf("includeRoot: %w (fix: name an existing directory)", err)
	}
	defer r.Close()
	fsys := &rootFS{fsys: r.FS(), dir: absRoot, hash: sha256.New(), left: maxZoneFileBytes}
	f, err := fsys.Open(filepath.ToSlash(rel))
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	d, err := parseZoneFile(bytes.NewReader(data), origin, filepath.ToSlash(rel), fsys)
	if err != nil {
		return nil, err
	}
	copy(d.digest[:], fsys.hash.Sum(nil))
	d.files = fsys.files
	return d, nil
}

// parseZoneFile parses a master file (named file, relative to fsys, in
// messages) for zone origin; $INCLUDE reads from fsys. It is the fuzzed
// entry point of zone-file loading.
func parseZoneFile(r io.Reader, origin, file string, fsys fs.FS) (*zoneFileData, error) {
	zp := dns.NewZoneParser(r, origin, file)
	zp.SetDefaultTTL(DNSDefaultRecordTTL)
	zp.SetIncludeAllowed(true)
	zp.SetIncludeFS(fsys)
	var rrs []dns.RR
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		if len(rrs) == maxZoneFileRecords {
			return nil, fmt.Errorf("%s: more than %d records (fix: split the zone, or serve fewer records)", file, maxZoneFileRecords)
		}
		rrs = append(rrs, rr)
	}
	if err := zp.Err(); err != nil {
		return nil, fmt.Errorf("%w (fix: correct the master file at that line)", err)
	}
	return zoneFromRRs(rrs, origin, file)
}

// zoneFromRRs turns parsed records into record sets (see zoneFileData).
func zoneFromRRs(rrs []dns.RR, origin, file string) (*zoneFileData, error) {
	d := &zoneFileData{}
	sets := map[string]int{}
	var errs []error
	for _, rr := range rrs {
		if err := d.add(rr, origin, file, sets); err != nil {
			errs = append(errs, err)
			if len(errs) == 10 {
				break
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return d, nil
}

// add adds one record of the file to d; sets maps "owner type" to the
// index of its set in d.records.
func (d *zoneFileData) add(rr dns.RR, origin, file string, sets map[string]int) error {
	h := rr.Header()
	owner := strings.ToLower(h.Name)
	typ := dns.TypeToString[h.Rrtype]
	at := fmt.Sprintf("%s: %s %s", file, owner, typ)
	switch {
	case h.Class != dns.ClassINET:
		return fmt.Errorf("%s: class %s (fix: only class IN is served)", at, dns.ClassToString[h.Class])
	case !InDNSZone(owner, origin):
		return fmt.Errorf("%s: %s is not in zone %s (fix: remove it, or check $ORIGIN)", at, owner, origin)
	}
	switch rr := rr.(type) {
	case *dns.SOA:
		return d.addSOA(rr, owner, origin, at)
	case *dns.NS:
		if owner == origin {
			d.nameServers = append(d.nameServers, strings.ToLower(rr.Ns))
			return nil
		}
	case *dns.DNSKEY, *dns.RRSIG, *dns.NSEC, *dns.NSEC3, *dns.NSEC3PARAM, *dns.CDS, *dns.CDNSKEY:
		return fmt.Errorf("%s: DNSSEC records are made by Spillway, which signs online (fix: load the unsigned zone and set dnssec on the zone)", at)
	}
	if !slices.Contains(dnsRecordTypes, typ) {
		return fmt.Errorf("%s: type %s is not served (fix: use %s, or remove the record)", at, typ, strings.Join(dnsRecordTypes, ", "))
	}
	data := strings.TrimPrefix(rr.String(), h.String())
	key := owner + " " + typ
	i, ok := sets[key]
	if !ok {
		ttl := int(h.Ttl)
		sets[key] = len(d.records)
		d.records = append(d.records, DNSRecord{Name: owner, Type: typ, TTL: &ttl, Rrdatas: []string{data}})
		d.where = append(d.where, at)
		return nil
	}
	r := &d.records[i]
	if uint32(*r.TTL) != h.Ttl {
		return fmt.Errorf("%s: TTL %d differs from the set's TTL %d (fix: give every record of a set the same TTL, RFC 2181 §5.2)", at, h.Ttl, *r.TTL)
	}
	if !slices.Contains(r.Rrdatas, data) {
		r.Rrdatas = append(r.Rrdatas, data)
	}
	return nil
}

// addSOA takes the zone's SOA from the file.
func (d *zoneFileData) addSOA(soa *dns.SOA, owner, origin, at string) error {
	switch {
	case owner != origin:
		return fmt.Errorf("%s: an SOA belongs at the apex %s (fix: remove it, or check $ORIGIN)", at, origin)
	case d.soa != nil:
		return fmt.Errorf("%s: a second SOA (fix: keep one)", at)
	}
	serial := int64(soa.Serial)
	refresh, retry, expire, minimum := int(soa.Refresh), int(soa.Retry), int(soa.Expire), int(soa.Minttl)
	d.soa = &DNSSOA{MName: strings.ToLower(soa.Ns), RName: strings.ToLower(soa.Mbox), Serial: &serial,
		Refresh: &refresh, Retry: &retry, Expire: &expire, Minimum: &minimum}
	return nil
}

// rootFS is the file system a zone file is read from: fsys (an os.Root,
// which refuses symbolic links out of it) below dir, refusing paths that
// leave it with a message naming includeRoot, hashing what it reads and
// bounding its total size.
type rootFS struct {
	fsys  fs.FS
	dir   string
	hash  hash.Hash
	files []string
	left  int64
}

// Open opens name (slash-separated, relative to the root).
func (r *rootFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, fmt.Errorf("%s leaves includeRoot %s (fix: keep included files inside includeRoot, or set includeRoot to a directory above them)", name, r.dir)
	}
	f, err := r.fsys.Open(name)
	if err != nil {
		if strings.Contains(err.Error(), "escapes from parent") || strings.Contains(err.Error(), "path escapes") {
			return nil, fmt.Errorf("%s leads out of includeRoot %s (fix: keep included files, and what their links point to, inside includeRoot)", name, r.dir)
		}
		return nil, err
	}
	r.files = append(r.files, filepath.Join(r.dir, filepath.FromSlash(name)))
	return &hashedFile{File: f, r: r}, nil
}

// hashedFile is a file of a rootFS: what is read from it is hashed and
// counted against the bound.
type hashedFile struct {
	fs.File
	r *rootFS
}

func (f *hashedFile) Read(p []byte) (int, error) {
	if f.r.left <= 0 {
		return 0, fmt.Errorf("zone files are larger than %d MiB together (fix: split the zone)", maxZoneFileBytes>>20)
	}
	if int64(len(p)) > f.r.left {
		p = p[:f.r.left]
	}
	n, err := f.File.Read(p)
	f.r.left -= int64(n)
	f.r.hash.Write(p[:n])
	return n, err
}
