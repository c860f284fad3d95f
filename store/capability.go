package store

import (
	"context"
	"strconv"
	"strings"
)

// Capabilities are the behaviours the engine relies on beyond reading and
// writing rows. They are part of Store, so a wrapper that embeds a Store
// forwards them and a wrapper that does not must implement them; the
// conformance suite (storetest) checks what each driver declares.
type Capabilities interface {
	// Notifier returns the store's cross-process notifier, or nil when the
	// database is reached by one process only (every change is then seen
	// by the engine that made it).
	Notifier() Notifier
	// Exclusive reports whether the database is held by this process
	// alone (an in-memory store, a SQLite file under its process lock). A
	// lease held by an owner that is not alive in this process is then the
	// lease of a dead process and can be taken over at once.
	Exclusive() bool
	// Health returns nil, or why the store cannot take writes any more
	// although each call would only find out one by one (a SQLite file
	// deleted under the open store). A driver with nothing to check
	// (memory, PostgreSQL, whose calls fail themselves when the server
	// does not answer) returns nil. A server reports it on its health
	// endpoint.
	Health(ctx context.Context) error
}

// Notifier wakes other processes sharing the database. A notification is a
// wake-up, never the data: the store stays the source of truth, and a
// woken reader re-reads it.
//
// Drivers with a Notifier publish on ChannelChanges inside the transaction
// of every write that commits steps or changes a run's status, so a change
// and its notification commit together (see ChangeStep and ChangeRun).
type Notifier interface {
	// Notify sends payload on channel to every Listen of channel, in any
	// process, this one included.
	Notify(ctx context.Context, channel, payload string) error
	// Listen subscribes to channel until ctx ends. After the subscription
	// was interrupted (a reconnect), an empty payload is delivered: any
	// number of notifications may have been lost, so re-read everything.
	Listen(ctx context.Context, channel string) (<-chan string, error)
}

// ChannelChanges is the channel on which drivers with a Notifier announce
// committed changes, with payloads made by ChangeStep and ChangeRun.
const ChannelChanges = "stepwise_changes"

// ChangeStep is the payload announcing that a session's steps up to seq
// are committed.
func ChangeStep(sessionID string, seq int64) string {
	return "S " + sessionID + " " + strconv.FormatInt(seq, 10)
}

// ChangeRun is the payload announcing that a run of a session entered
// status.
func ChangeRun(sessionID, runID, status string) string {
	return "R " + sessionID + " " + runID + " " + status
}

// Change is a parsed ChannelChanges payload.
type Change struct {
	SessionID string
	Seq       int64  // for a step change
	RunID     string // for a run change
	Status    string // for a run change
}

// ParseChange parses a ChannelChanges payload; ok is false for anything
// else (an empty payload included).
func ParseChange(payload string) (c Change, ok bool) {
	f := strings.Fields(payload)
	switch {
	case len(f) == 3 && f[0] == "S":
		n, err := strconv.ParseInt(f[2], 10, 64)
		return Change{SessionID: f[1], Seq: n}, err == nil
	case len(f) == 4 && f[0] == "R":
		return Change{SessionID: f[1], RunID: f[2], Status: f[3]}, true
	}
	return Change{}, false
}
