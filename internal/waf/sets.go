package waf

import (
	"fmt"
	"strings"
)

// category is one CRS rule file and the name Google gives its rules.
type category struct {
	name   string // Google's name, as in sqli-v33-stable and in ...-id942100-sqli
	prefix int    // the CRS rule IDs' first three digits, 942 for 942100
	file   string // the CRS rule file under @owasp_crs/
}

// categories lists the CRS request rule files Cloud Armor's preconfigured
// rules are built from. nodejs (CRS 3.3's name) and generic (CRS 4's) are
// the same file.
var categories = []category{
	{"methodenforcement", 911, "REQUEST-911-METHOD-ENFORCEMENT.conf"},
	{"scannerdetection", 913, "REQUEST-913-SCANNER-DETECTION.conf"},
	{"protocolattack", 921, "REQUEST-921-PROTOCOL-ATTACK.conf"},
	{"lfi", 930, "REQUEST-930-APPLICATION-ATTACK-LFI.conf"},
	{"rfi", 931, "REQUEST-931-APPLICATION-ATTACK-RFI.conf"},
	{"rce", 932, "REQUEST-932-APPLICATION-ATTACK-RCE.conf"},
	{"php", 933, "REQUEST-933-APPLICATION-ATTACK-PHP.conf"},
	{"nodejs", 934, "REQUEST-934-APPLICATION-ATTACK-GENERIC.conf"},
	{"generic", 934, "REQUEST-934-APPLICATION-ATTACK-GENERIC.conf"},
	{"xss", 941, "REQUEST-941-APPLICATION-ATTACK-XSS.conf"},
	{"sqli", 942, "REQUEST-942-APPLICATION-ATTACK-SQLI.conf"},
	{"sessionfixation", 943, "REQUEST-943-APPLICATION-ATTACK-SESSION-FIXATION.conf"},
	{"java", 944, "REQUEST-944-APPLICATION-ATTACK-JAVA.conf"},
}

// crsVersion is one CRS release Google names rule sets after.
type crsVersion struct {
	label string   // for messages
	infix string   // in set names: "-v422", "-v33", "" for CRS 3.0
	code  string   // in rule IDs: "042200" as in owasp-crs-v042200-id942100-sqli
	cats  []string // the categories Google offers for it
}

// crsVersions lists the CRS releases Google offers preconfigured rules
// for, newest first. Spillway runs every one of them on the CRS it embeds
// (see CRSVersion).
var crsVersions = []crsVersion{
	{"CRS 4.22 (-v422)", "-v422", "042200", []string{"sqli", "xss", "lfi", "rfi", "rce", "methodenforcement", "scannerdetection", "protocolattack", "php", "sessionfixation", "java", "generic"}},
	{"CRS 3.3 (-v33)", "-v33", "030301", []string{"sqli", "xss", "lfi", "rfi", "rce", "methodenforcement", "scannerdetection", "protocolattack", "php", "sessionfixation", "java", "nodejs"}},
	{"CRS 3.0 (no version in the name)", "", "030001", []string{"sqli", "xss", "lfi", "rfi", "rce", "methodenforcement", "scannerdetection", "protocolattack", "php", "sessionfixation"}},
}

// jsonSQLiSet is Google's one-signature set for SQL injection in JSON
// bodies; its rule IDs carry no CRS version (owasp-crs-id942550-sqli).
const jsonSQLiSet = "json-sqli-canary"

// setDef is a rule set name resolved: which CRS rules it covers and how
// its rule IDs are spelled.
type setDef struct {
	name    string    // as written, e.g. sqli-v33-stable
	cat     *category // the CRS file
	version string    // the rule IDs' version code; "" for json-sqli-canary
	only    []int     // when set, the set covers only these rule IDs
}

// googleID spells CRS rule id the way this set's signatures are named.
func (d setDef) googleID(id int) string {
	if d.version == "" {
		return fmt.Sprintf("owasp-crs-id%06d-%s", id, d.cat.name)
	}
	return fmt.Sprintf("owasp-crs-v%s-id%06d-%s", d.version, id, d.cat.name)
}

// covers reports whether CRS rule id belongs to this set.
func (d setDef) covers(id int) bool {
	if d.only != nil {
		for _, o := range d.only {
			if o == id {
				return true
			}
		}
		return false
	}
	return id/1000 == d.cat.prefix
}

func categoryByName(name string) *category {
	for i := range categories {
		if categories[i].name == name {
			return &categories[i]
		}
	}
	return nil
}

// lookupSet resolves a Google rule set name, or says which names exist.
func lookupSet(name string) (setDef, error) {
	if name == jsonSQLiSet {
		return setDef{name: name, cat: categoryByName("sqli"), only: []int{942550}}, nil
	}
	if name == "cve-canary" {
		return setDef{}, fmt.Errorf("rule set %q is Google's own Log4j and React signatures, which the OWASP CRS does not carry; use java-v422-stable (CRS rules 944150-944152 detect Log4Shell) instead", name)
	}
	base, ok := strings.CutSuffix(name, "-stable")
	if !ok {
		base, ok = strings.CutSuffix(name, "-canary")
	}
	if !ok {
		return setDef{}, fmt.Errorf("unknown preconfigured WAF rule set %q: a name ends in -stable or -canary, as in sqli-v422-stable", name)
	}
	for _, v := range crsVersions {
		cat, ok := strings.CutSuffix(base, v.infix)
		if !ok || (v.infix == "" && strings.Contains(cat, "-v")) {
			continue
		}
		for _, c := range v.cats {
			if c == cat {
				return setDef{name: name, cat: categoryByName(cat), version: v.code}, nil
			}
		}
		return setDef{}, unknownSetError(name, cat, v)
	}
	return setDef{}, fmt.Errorf("unknown preconfigured WAF rule set %q: the versions are -v422 (CRS 4.22), -v33 (CRS 3.3) and none (CRS 3.0), as in sqli-v422-stable, sqli-v33-stable, sqli-stable", name)
}

// unknownSetError names the sets of version v, and where cat exists
// under another version or name (nodejs and generic are one CRS file).
func unknownSetError(name, cat string, v crsVersion) error {
	var elsewhere []string
	for _, o := range crsVersions {
		for _, c := range o.cats {
			if c == cat || (cat == "nodejs" || cat == "generic") && (c == "nodejs" || c == "generic") {
				elsewhere = append(elsewhere, c+o.infix+"-stable")
			}
		}
	}
	hint := ""
	if len(elsewhere) > 0 {
		hint = "; use " + strings.Join(elsewhere, " or ")
	}
	return fmt.Errorf("unknown preconfigured WAF rule set %q: %s has %s (each -stable or -canary)%s",
		name, v.label, strings.Join(v.cats, ", "), hint)
}
