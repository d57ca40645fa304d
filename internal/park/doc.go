// Package park keeps idle connections without a goroutine each.
//
// A Go server waits for a client's next request in a goroutine blocked
// on the socket: a few KiB of stack per idle connection, which for
// 10,000 idle keep-alive clients is most of what the server holds for
// them. A Lot waits for many sockets at once, on an epoll set of its own
// served by one goroutine: a connection idle long enough is parked
// (its goroutine ends) and is woken, on a new goroutine, when its socket
// becomes readable or its idle deadline passes. This is how nginx and
// HAProxy hold idle connections: an entry in an event set.
//
// When a burst of parking ends (1,024 sockets or more parked, then none
// for a tick), the Lot returns freed memory to the system
// (debug.FreeOSMemory, at most every 30 s): Go's runtime would keep the
// burst's goroutine stacks as idle heap for a long time on a server whose
// clients sit idle.
//
// The Lot only waits; what to park and when is the caller's: see
// internal/h1. On systems without epoll New fails and nothing is parked.
package park
