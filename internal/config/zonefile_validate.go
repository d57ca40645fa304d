package config

import (
	"strconv"
	"strings"
)

// zoneRecord is one static record set of a zone under validation: r,
// written at path; yaml is its records[] index, or -1 for a set of the
// zone file (whose path is dnsZones[i].zoneFile.records[j] while it is
// validated, and dnsZones[i].zoneFile.path in the errors reported).
type zoneRecord struct {
	path string
	r    *DNSRecord
	yaml int
}

// zoneFile loads zone z's zoneFile (when it has one) and returns every
// static record set of z to validate: records[], then the file's. A
// file that does not load is reported at zoneFile.path, its problems
// naming the file and, for syntax errors, the line.
func (v *validator) zoneFile(p string, z *DNSZone, zone string) []zoneRecord {
	recs := make([]zoneRecord, 0, len(z.Records))
	for j := range z.Records {
		recs = append(recs, zoneRecord{path: at("%s.records[%d]", p, j), r: &z.Records[j], yaml: j})
	}
	z.file = nil
	zf := z.ZoneFile
	if zf == nil {
		return recs
	}
	fp := p + ".zoneFile.path"
	if zf.Path == "" {
		v.add(fp, "give the master file's path, e.g. zoneFile: {path: /etc/spillway/"+strings.TrimSuffix(zone, ".")+".zone}", "a zone file path is required")
		return recs
	}
	d, err := loadZoneFile(zf, zone)
	if err != nil {
		v.addErrors(fp, err)
		return recs
	}
	z.file = d
	if z.SOA != nil && d.soa != nil {
		v.add(p+".soa", "keep one SOA: remove soa here, or the SOA record from "+zf.Path, "the zone file %s has an SOA too", zf.Path)
	}
	if len(z.NameServers) > 0 && len(d.nameServers) > 0 {
		v.add(p+".nameServers", "keep one set of apex NS records: remove nameServers here, or the apex NS records from "+zf.Path,
			"the zone file %s has NS records at the apex too", zf.Path)
	}
	v.dnsSOA(fp, d.soa, zone)
	for j := range d.records {
		recs = append(recs, zoneRecord{path: at("%s.zoneFile.records[%d]", p, j), r: &d.records[j], yaml: -1})
	}
	return recs
}

// addErrors reports err (each of a joined error) at path, taking the
// "(fix: …)" at the end of its text as the fix.
func (v *validator) addErrors(path string, err error) {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		msg, fix := e.Error(), ""
		if i := strings.LastIndex(msg, " (fix: "); i >= 0 && strings.HasSuffix(msg, ")") {
			msg, fix = msg[:i], msg[i+len(" (fix: "):len(msg)-1]
		}
		v.add(path, fix, "%s", msg)
	}
}

// fileRecordErrors moves the errors about zone z's file sets (reported
// since v.errs[from]) to zoneFile.path, each naming the file and the set
// ("FILE: OWNER TYPE"), also where another error mentions one.
func (v *validator) fileRecordErrors(p string, z *DNSZone, from int) {
	if z.file == nil {
		return
	}
	prefix := p + ".zoneFile.records["
	var pairs []string
	for j, w := range z.file.where {
		pairs = append(pairs, prefix+strconv.Itoa(j)+"]", "the zone file's "+w)
	}
	names := strings.NewReplacer(pairs...)
	for _, e := range v.errs[from:] {
		if rest, ok := strings.CutPrefix(e.Path, prefix); ok {
			n, _, _ := strings.Cut(rest, "]")
			if j, err := strconv.Atoi(n); err == nil && j < len(z.file.where) {
				e.Path = p + ".zoneFile.path"
				e.Msg = z.file.where[j] + ": " + names.Replace(e.Msg)
				e.Fix = names.Replace(e.Fix)
				continue
			}
		}
		e.Msg, e.Fix = names.Replace(e.Msg), names.Replace(e.Fix)
	}
}
