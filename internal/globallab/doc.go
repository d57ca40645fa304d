// Package globallab is `spillway lab --global`: a lab of Linux network
// namespaces with three sites (us-east4 in Ashburn, europe-west3 in
// Frankfurt, asia-northeast1 in Tokyo). Each site has a router running
// BIRD, peered over eBGP with the other two across delayed links; an
// edge `spillway serve` announcing the shared anycast prefix to it over
// BGP; a regional-layer `spillway serve` with two zones of backends; and
// a client namespace near it. A GSLB (`spillway serve` with a DNS
// frontend) on the Frankfurt LAN answers by the clients' subnets. The
// lab measures what the network and the two layers do and prints a
// table of expected, measured and verdict rows (docs/global.md).
package globallab
