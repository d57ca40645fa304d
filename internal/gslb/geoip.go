package gslb

import (
	"fmt"
	"math"
	"net/netip"
	"os"

	"github.com/oschwald/maxminddb-golang"

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
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r, err := maxminddb.FromBytes(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &geoDB{r: r}, nil
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

// locate returns where the database places addr and the prefix length
// of the database network holding addr (the ECS scope for which the
// answer holds, also when the network has no record).
func (g *geoDB) locate(addr netip.Addr) (lat, lon float64, ok bool, scope int) {
	var rec geoRecord
	network, found, err := g.r.LookupNetwork(addr.AsSlice(), &rec)
	if network != nil {
		ones, bits := network.Mask.Size()
		if addr.Is4() && bits == 128 {
			ones -= 96 // the IPv4 subtree is shallower than ::/96
		}
		scope = max(ones, 0)
	}
	if err != nil || !found {
		return 0, 0, false, scope
	}
	if l := rec.Location; l.Latitude != nil && l.Longitude != nil {
		return *l.Latitude, *l.Longitude, true, scope
	}
	if lat, lon, ok := continentCenter(rec.Continent.Code); ok {
		return lat, lon, true, scope
	}
	return 0, 0, false, scope
}

// geoLadder returns the ladder for a client the database places at addr
// (that of the nearest member region; -1 when the database does not
// place it) and the ECS scope.
func (n *gname) geoLadder(addr netip.Addr) (ladder, scope int) {
	lat, lon, ok, scope := n.geo.locate(addr)
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
