// Package waf evaluates Google Cloud Armor's preconfigured WAF rules
// (evaluatePreconfiguredWaf and evaluatePreconfiguredExpr) with the OWASP
// Core Rule Set run by Coraza.
//
// A security policy's rule sets are parsed into SetRefs (ParseWaf,
// ParseExpr, or ParseCall for a call's text), compiled once at config load
// into an Engine (Compiler.Compile), and evaluated per request
// (Engine.Evaluate), one Coraza transaction for all of the policy's sets.
// A set matches when any of its signatures that are on matched, as Cloud
// Armor decides; CRS anomaly scores play no part. docs/security-policies.md
// ("Preconfigured WAF rules") gives the names, the sensitivity mapping,
// the limits and what differs from Google.
//
// Typical use, at config load and per request:
//
//	ref, err := waf.ParseWaf("sqli-v33-stable", map[string]any{"sensitivity": int64(1)})
//	engine, err := compiler.Compile([]waf.SetRef{ref, ...}, waf.Options{})
//	res := engine.Evaluate(req, bodyPrefix) // res.Sets[i].Matched, .IDs
//
// Importing the package registers one Coraza body processor
// ("spillwaymultipart", see multipart.go) in Coraza's plugin registry.
package waf
