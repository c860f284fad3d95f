// Package ids makes the ids of steps, runs and sessions: UUIDv7, strictly
// increasing within the process.
package ids
