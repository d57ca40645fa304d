package sim

// DialTimeout is dialTimeout, for tests.
const DialTimeout = dialTimeout
