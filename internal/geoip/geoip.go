// Package geoip reads MaxMind-format databases (GeoLite2/GeoIP2 City or
// Country, or any .mmdb with the same fields) into memory, for the DNS
// GEO policy and the proxy's origin.region_code.
package geoip

import (
	"fmt"
	"net/netip"
	"os"

	"github.com/oschwald/maxminddb-golang"
)

// DB is a database read into memory. Lookups are safe for concurrent
// use.
type DB struct {
	r *maxminddb.Reader
}

// Open reads the database at path.
func Open(path string) (*DB, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r, err := maxminddb.FromBytes(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &DB{r: r}, nil
}

// Reader returns the underlying reader, for lookups of other fields.
func (db *DB) Reader() *maxminddb.Reader { return db.r }

// countryRecord is the part of a record RegionCode reads.
type countryRecord struct {
	Country struct {
		IsoCode string `maxminddb:"iso_code"`
	} `maxminddb:"country"`
}

// RegionCode returns the ISO 3166-1 alpha-2 code of addr's country, ""
// when the database does not know addr.
func (db *DB) RegionCode(addr netip.Addr) string {
	if db == nil || !addr.IsValid() {
		return ""
	}
	var rec countryRecord
	if err := db.r.Lookup(addr.Unmap().AsSlice(), &rec); err != nil {
		return ""
	}
	return rec.Country.IsoCode
}
