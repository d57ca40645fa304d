// Package cdnpolicy holds Cloud CDN's decisions as pure functions: what
// a cdnPolicy compiles to (Compile), whether a response may be stored and
// for how long (Decide), what the cache key is (Policy.Key), whether a
// request bypasses the cache (Policy.Bypass), which Vary headers a stored
// response may name, and signed URLs and cookies (VerifyURL,
// VerifyCookie). It reads no clock: the time comes in as an argument.
// Package cdn, the shell, keeps the store, coalesces misses and serves.
//
// docs/cdn.md states Google's rules point by point and what Spillway
// decided where Google is silent.
package cdnpolicy
