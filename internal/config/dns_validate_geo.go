package config

import (
	"fmt"
	"net/netip"
	"strings"
)

// isoCountries are the ISO 3166-1 alpha-2 codes, and XK (Kosovo, which
// MaxMind databases use), space-separated.
const isoCountries = "AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ " +
	"BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY BZ " +
	"CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ " +
	"DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR " +
	"GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY " +
	"HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO JP " +
	"KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY " +
	"MA MC MD ME MF MG MH MK ML MM MN MO MP MQ MR MS MT MU MV MW MX MY MZ " +
	"NA NC NE NF NG NI NL NO NP NR NU NZ OM " +
	"PA PE PF PG PH PK PL PM PN PR PS PT PW PY QA RE RO RS RU RW " +
	"SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ " +
	"TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ " +
	"UA UG UM US UY UZ VA VC VE VG VI VN VU WF WS XK YE YT ZA ZM ZW"

// ISOCountry reports whether code is an ISO 3166-1 alpha-2 country code
// (upper case), or XK.
func ISOCountry(code string) bool {
	return len(code) == 2 && strings.Contains(" "+isoCountries+" ", " "+code+" ")
}

// ContinentCode reports whether code is one of the seven continent codes
// of MaxMind databases: AF, AN, AS, EU, NA, OC, SA.
func ContinentCode(code string) bool {
	switch code {
	case "AF", "AN", "AS", "EU", "NA", "OC", "SA":
		return true
	}
	return false
}

// gslbLocations validates gslbNames[].locations: each entry has exactly
// one key (cidr, country or continent) and a region; country and
// continent keys need a geoDatabase to give clients theirs, and each key
// is listed once.
func (v *validator) gslbLocations(p string, g *GSLBName) {
	seen := map[string]int{}
	for k, l := range g.Locations {
		lp := at("%s.locations[%d]", p, k)
		keys := 0
		for _, s := range []string{l.CIDR, l.Country, l.Continent} {
			if s != "" {
				keys++
			}
		}
		if l.Region == "" {
			v.add(lp+".region", "name the region these clients are in, e.g. region: europe-west1", "a region is required")
		}
		switch {
		case keys == 0:
			v.add(lp, "give a cidr (198.51.100.0/24), a country (JP) or a continent (EU)", "a cidr, country or continent is required")
			continue
		case keys > 1:
			v.add(lp, "keep one of cidr, country and continent per entry; list the others as entries of their own",
				"cidr, country and continent are exclusive")
			continue
		}
		var key string
		switch {
		case l.CIDR != "":
			pfx, err := netip.ParsePrefix(l.CIDR)
			switch {
			case err != nil:
				v.add(lp+".cidr", "write a subnet, e.g. 198.51.100.0/24 or 2001:db8::/32", "%q is not a CIDR", l.CIDR)
				continue
			case pfx.Masked() != pfx:
				v.add(lp+".cidr", fmt.Sprintf("write %s", pfx.Masked()), "%q has host bits set", l.CIDR)
				continue
			}
			key = "cidr " + pfx.String()
		case l.Country != "":
			if !ISOCountry(l.Country) {
				fix := "write an ISO 3166-1 alpha-2 code, e.g. JP, DE, US"
				if up := strings.ToUpper(l.Country); ISOCountry(up) {
					fix = "write " + up + " (upper case, as MaxMind's country.iso_code)"
				} else if l.Country == "UK" {
					fix = "write GB (the ISO code of the United Kingdom)"
				}
				v.add(lp+".country", fix, "%q is not an ISO 3166-1 alpha-2 country code", l.Country)
				continue
			}
			key = "country " + l.Country
		default:
			if !ContinentCode(l.Continent) {
				fix := "use one of AF, AN, AS, EU, NA, OC, SA"
				if up := strings.ToUpper(l.Continent); ContinentCode(up) {
					fix = "write " + up + " (upper case, as MaxMind's continent.code)"
				}
				v.add(lp+".continent", fix, "%q is not a continent code", l.Continent)
				continue
			}
			key = "continent " + l.Continent
		}
		if first, dup := seen[key]; dup {
			v.add(lp, "list each cidr, country and continent once", "%s is already locations[%d]", key, first)
			continue
		}
		seen[key] = k
		if l.CIDR == "" && g.GeoDatabase == "" {
			field := "country"
			if l.Continent != "" {
				field = "continent"
			}
			v.add(lp+"."+field, "set geoDatabase: PATH (a MaxMind GeoLite2/GeoIP2 Country or City database), which gives clients their "+field,
				"a %s entry needs a geoDatabase", field)
		}
	}
}

// gslbBias validates members[].bias: -99..99, and only for LATENCY.
func (v *validator) gslbBias(p string, bias *int, policy string) {
	if bias == nil {
		return
	}
	if policy != "LATENCY" {
		v.add(p, "set policy: LATENCY, or remove the bias", "bias is only used by the LATENCY policy")
		return
	}
	if *bias < -99 || *bias > 99 {
		v.add(p, "use -99 to 99: positive draws clients from farther away, negative pushes them off",
			"bias %d is out of range", *bias)
	}
}
