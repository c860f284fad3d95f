// Package executor is the engine's background service: it claims queued
// runs (and runs whose lease expired) and hands them to the engine to
// execute, keeps the leases of every run executing in the process renewed
// (and stops those whose renewal stalled before they can lapse), follows
// the store's change notifications, and wakes parents left waiting on
// children that have all ended. It has one lifecycle: Start, Stop.
package executor
