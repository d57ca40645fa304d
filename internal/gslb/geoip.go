package gslb

import (
	"math"
	"net/netip"

	"github.com/oschwald/maxminddb-golang"

	"github.com/spillwaylb/spillway/internal/geoip"
	"github.com/spillwaylb/spillway/internal/plan"
)

// geoDB is a MaxMind-format database (GeoLite2/GeoIP2 City or Country,
// or any .mmdb with the same location or continent fields) read into
// memory. Lookups are safe for concurrent use.
type geoDB struct {
	r *maxminddb.Reader
}

// geoRecord is the part of a record the GEO policy uses.
type geoRecord struct {
	Country struct {
		IsoCode string `maxminddb:"iso_code"`
	} `maxminddb:"country"`
	Continent struct {
		Code string `maxminddb:"code"`
	} `maxminddb:"continent"`
	Location struct {
		Latitude  *float64 `maxminddb:"latitude"`
		Longitude *float64 `maxminddb:"longitude"`
	} `maxminddb:"location"`
}

// geoRegion is a member region the database can place clients near.
type geoRegion struct {
	ladder   int // the client-region ladder of this region
	lat, lon float64
}

// openGeoDB reads the database at path.
func openGeoDB(path string) (*geoDB, error) {
	db, err := geoip.Open(path)
	if err != nil {
		return nil, err
	}
	return &geoDB{r: db.Reader()}, nil
}

// continentCenter returns a rough centre of a continent (MaxMind
// continent code), for records (Country databases) without coordinates.
func continentCenter(code string) (lat, lon float64, ok bool) {
	switch code {
	case "AF":
		return 2, 21, true
	case "AN":
		return -80, 0, true
	case "AS":
		return 34, 100, true
	case "EU":
		return 50, 10, true
	case "NA":
		return 40, -95, true
	case "OC":
		return -25, 140, true
	case "SA":
		return -15, -60, true
	}
	return 0, 0, false
}

// lookup reads the record of addr into rec and returns whether there is
// one and the prefix length of the database network holding addr (the
// ECS scope for which the answer holds, also when the network has no
// record).
func (g *geoDB) lookup(addr netip.Addr, rec *geoRecord) (found bool, scope int) {
	network, found, err := g.r.LookupNetwork(addr.AsSlice(), rec)
	if network != nil {
		ones, bits := network.Mask.Size()
		if addr.Is4() && bits == 128 {
			ones -= 96 // the IPv4 subtree is shallower than ::/96
		}
		scope = max(ones, 0)
	}
	return found && err == nil, scope
}

// coordinates returns where rec places its network: its location, else
// the centre of its continent.
func (rec *geoRecord) coordinates() (lat, lon float64, ok bool) {
	if l := rec.Location; l.Latitude != nil && l.Longitude != nil {
		return *l.Latitude, *l.Longitude, true
	}
	return continentCenter(rec.Continent.Code)
}

// geoLadder returns the ladder for a client the database places at addr
// and the ECS scope: that of the region its country's locations entry
// names, else its continent's, else the nearest member region to its
// coordinates; -1 when the database does not place it.
func (n *gname) geoLadder(addr netip.Addr) (ladder, scope int) {
	var rec geoRecord
	found, scope := n.geo.lookup(addr, &rec)
	if !found {
		return -1, scope
	}
	if l, ok := n.geoKeys[countryKey(rec.Country.IsoCode)]; ok && rec.Country.IsoCode != "" {
		return l, scope
	}
	if l, ok := n.geoKeys[continentKey(rec.Continent.Code)]; ok && rec.Continent.Code != "" {
		return l, scope
	}
	lat, lon, ok := rec.coordinates()
	if !ok {
		return -1, scope
	}
	ladder, best := -1, math.Inf(1)
	for _, r := range n.geoRegions {
		if d := plan.DistanceKm(lat, lon, r.lat, r.lon); d < best {
			ladder, best = r.ladder, d
		}
	}
	return ladder, scope
}

// geoKey is a country or continent key of a name's locations: a
// two-letter code with a tag, so that NA (Namibia) and NA (North
// America) differ. It is a comparable value: map lookups with it do not
// allocate.
type geoKey struct {
	continent bool
	code      [2]byte
}

// countryKey and continentKey build keys from MaxMind codes (codes of
// other lengths give keys no entry has).
func countryKey(code string) geoKey   { return newGeoKey(false, code) }
func continentKey(code string) geoKey { return newGeoKey(true, code) }

func newGeoKey(continent bool, code string) geoKey {
	k := geoKey{continent: continent}
	if len(code) == 2 {
		k.code = [2]byte{code[0], code[1]}
	} else {
		k.code = [2]byte{0xff, 0xff}
	}
	return k
}
