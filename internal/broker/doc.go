// Package broker delivers the live events of the engine's sessions: the
// Broker positions each event and fans it out to the session's
// subscribers, keeping a ring of recent events for reconnections; a Sink
// hands an inline execution's events to its caller; SessionLocks are the
// per-session commit locks that keep commits and their publication in
// sequence order.
package broker
