package waf

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// SetRef is one preconfigured rule set as a rule's expression names it:
// the arguments of evaluatePreconfiguredWaf or evaluatePreconfiguredExpr.
type SetRef struct {
	// Set is Google's rule set name, e.g. "sqli-v33-stable".
	Set string
	// Sensitivity turns on the set's signatures whose CRS paranoia level
	// is at most this, 0-4. 0 turns none on: only OptIn's.
	Sensitivity int
	// OptOut lists signatures to leave out, in Google's form
	// ("owasp-crs-v030301-id942251-sqli").
	OptOut []string
	// OptIn lists the signatures to turn on when Sensitivity is 0.
	OptIn []string
}

// maxSignatures bounds the signature IDs one SetRef may list (Google
// bounds a whole expression to 2,048 characters, which holds about 60).
const maxSignatures = 1024

// DefaultSensitivity is the sensitivity of a set named without one:
// evaluatePreconfiguredExpr's, and evaluatePreconfiguredWaf's without
// 'sensitivity' (Google: "configured to run at sensitivity level 4").
const DefaultSensitivity = 4

// Option keys of evaluatePreconfiguredWaf's second argument.
const (
	keySensitivity = "sensitivity"
	keyOptOut      = "opt_out_rule_ids"
	keyOptIn       = "opt_in_rule_ids"
)

// ParseWaf builds the SetRef of evaluatePreconfiguredWaf(set, opts), opts
// being the map literal's entries as Go values (nil when the call has no
// second argument): "sensitivity" an integer 0-4, "opt_out_rule_ids" and
// "opt_in_rule_ids" lists of strings ([]string or []any).
func ParseWaf(set string, opts map[string]any) (SetRef, error) {
	ref := SetRef{Set: set, Sensitivity: DefaultSensitivity}
	_, hasSensitivity := opts[keySensitivity]
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the same error for the same map, every time
	for _, k := range keys {
		v := opts[k]
		var err error
		switch k {
		case keySensitivity:
			ref.Sensitivity, err = sensitivityValue(v)
		case keyOptOut:
			ref.OptOut, err = stringList(v)
		case keyOptIn:
			ref.OptIn, err = stringList(v)
		default:
			err = fmt.Errorf("unknown option %q; evaluatePreconfiguredWaf takes %q, %q and %q", k, keySensitivity, keyOptOut, keyOptIn)
		}
		if err != nil {
			return SetRef{}, fmt.Errorf("evaluatePreconfiguredWaf(%q): %w", set, err)
		}
	}
	if len(ref.OptIn) > 0 && !hasSensitivity {
		return SetRef{}, fmt.Errorf("evaluatePreconfiguredWaf(%q): %q needs %q: 0 (opt-ins add to a set that starts empty)", set, keyOptIn, keySensitivity)
	}
	if err := ref.Validate(); err != nil {
		return SetRef{}, err
	}
	return ref, nil
}

// ParseExpr builds the SetRef of evaluatePreconfiguredExpr(set, optOut):
// every signature of the set (sensitivity 4) but those opted out.
func ParseExpr(set string, optOut []string) (SetRef, error) {
	ref := SetRef{Set: set, Sensitivity: DefaultSensitivity, OptOut: optOut}
	if err := ref.Validate(); err != nil {
		return SetRef{}, err
	}
	return ref, nil
}

func sensitivityValue(v any) (int, error) {
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int64:
		n = x
	case uint64:
		n = int64(min(x, math.MaxInt32))
	case float64:
		if x != math.Trunc(x) || x < math.MinInt32 || x > math.MaxInt32 {
			return 0, fmt.Errorf("%q is %v; it takes an integer 0-4", keySensitivity, x)
		}
		n = int64(x)
	default:
		return 0, fmt.Errorf("%q is a %T; it takes an integer 0-4", keySensitivity, v)
	}
	if n < 0 || n > 4 {
		return 0, fmt.Errorf("%q is %d; it takes 0 (none unless opted in) to 4 (every signature)", keySensitivity, n)
	}
	return int(n), nil
}

func stringList(v any) ([]string, error) {
	switch x := v.(type) {
	case []string:
		return x, nil
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("a rule ID list holds %v (%T); it takes strings like 'owasp-crs-v030301-id942251-sqli'", e, e)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("a rule ID list is a %T; write a list like ['owasp-crs-v030301-id942251-sqli']", v)
}

// Validate checks the set name, the sensitivity and the form of every
// signature ID, each error naming the fix. It does not check that a
// signature exists in the embedded CRS: Compile warns about those.
func (r SetRef) Validate() error {
	def, err := lookupSet(r.Set)
	if err != nil {
		return err
	}
	if r.Sensitivity < 0 || r.Sensitivity > 4 {
		return fmt.Errorf("rule set %q: sensitivity %d; it takes 0 (none unless opted in) to 4 (every signature)", r.Set, r.Sensitivity)
	}
	if len(r.OptIn) > 0 && r.Sensitivity != 0 {
		return fmt.Errorf("rule set %q: opt_in_rule_ids needs sensitivity 0 (it is %d); to drop signatures from a sensitivity, use opt_out_rule_ids", r.Set, r.Sensitivity)
	}
	if len(r.OptIn) > 0 && len(r.OptOut) > 0 {
		return fmt.Errorf("rule set %q: give opt_in_rule_ids or opt_out_rule_ids, not both", r.Set)
	}
	if n := len(r.OptIn) + len(r.OptOut); n > maxSignatures {
		return fmt.Errorf("rule set %q: %d signature IDs; at most %d", r.Set, n, maxSignatures)
	}
	for _, ids := range [][]string{r.OptOut, r.OptIn} {
		for _, s := range ids {
			if _, err := def.parseSignature(s); err != nil {
				return fmt.Errorf("rule set %q: %w", r.Set, err)
			}
		}
	}
	return nil
}

// signature is a parsed Google signature ID.
type signature struct {
	id  int       // the CRS rule ID, 942251
	cat *category // from the ID's suffix
}

// parseSignature reads one of this set's signature IDs:
// owasp-crs-v<version>-id<rule>-<category>, or owasp-crs-id<rule>-<category>
// for json-sqli-canary. The version must be the set's (Google refuses a
// 3.0 ID in a 3.3 set); the category must be the rule's.
func (d setDef) parseSignature(s string) (signature, error) {
	want := d.googleID(942100)
	rest, ok := strings.CutPrefix(s, "owasp-crs-")
	if !ok || len(s) > 64 {
		return signature{}, fmt.Errorf("signature %q: not a signature ID; they look like %q", s, want)
	}
	version := ""
	if v, after, ok := strings.Cut(rest, "-"); ok && strings.HasPrefix(v, "v") {
		version, rest = v[1:], after
	}
	if version != d.version {
		return signature{}, fmt.Errorf("signature %q: its CRS version %q is not the set's; this set's IDs look like %q", s, version, want)
	}
	num, catName, ok := strings.Cut(strings.TrimPrefix(rest, "id"), "-")
	if !strings.HasPrefix(rest, "id") || !ok || len(num) != 6 {
		return signature{}, fmt.Errorf("signature %q: the rule part is id and 6 digits, as in %q", s, want)
	}
	id, err := strconv.Atoi(num)
	if err != nil || num[0] == '+' || num[0] == '-' {
		return signature{}, fmt.Errorf("signature %q: the rule part is id and 6 digits, as in %q", s, want)
	}
	cat := categoryByName(catName)
	if cat == nil {
		return signature{}, fmt.Errorf("signature %q: unknown category %q; it ends in the rule's category, as in %q", s, catName, want)
	}
	if id/1000 != cat.prefix {
		return signature{}, fmt.Errorf("signature %q: rule %d is not in category %s (%d000-%d999)", s, id, cat.name, cat.prefix, cat.prefix)
	}
	return signature{id: id, cat: cat}, nil
}

// errCall is the start of every ParseCall error.
var errCall = errors.New("preconfigured WAF call")

// Expression renders r as Cloud Armor's rules language writes it, the
// form ParseCall reads: evaluatePreconfiguredWaf with the sensitivity and
// whichever signature list is set.
func (r SetRef) Expression() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s(%s, {%s: %d", FuncWaf, quote(r.Set), quote(keySensitivity), r.Sensitivity)
	for _, l := range []struct {
		key string
		ids []string
	}{{keyOptOut, r.OptOut}, {keyOptIn, r.OptIn}} {
		if len(l.ids) == 0 {
			continue
		}
		fmt.Fprintf(&b, ", %s: [", quote(l.key))
		for i, id := range l.ids {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(quote(id))
		}
		b.WriteString("]")
	}
	b.WriteString("})")
	return b.String()
}

// quote writes s as a single-quoted string ParseCall reads back.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
