package postgres

import (
	"context"
	"strings"

	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// Notification limits.
const (
	// MaxPayload is the largest Notify payload, in bytes (PostgreSQL
	// refuses 8000 and more).
	MaxPayload = 7999
	// ListenBuffer is how many payloads a Listen channel holds; when it is
	// full, newer payloads for it are dropped (the reader has wake-ups
	// pending already).
	ListenBuffer = 64
)

// channelName returns the database-wide PostgreSQL channel of a store
// channel: "<schema>.<channel>", so stores in different schemas of one
// database do not hear each other.
func (s *Store) channelName(channel string) (string, error) {
	if channel == "" {
		return "", rules.Invalid("notification channel is required")
	}
	name := s.schema + "." + channel
	if len(name) > maxIdentifier || strings.ContainsRune(name, 0) {
		return "", rules.Invalid("notification channel %q: %q must be at most %d bytes, without NUL", channel, name, maxIdentifier)
	}
	return name, nil
}

// Notify sends payload on channel to every Listen of that channel on every
// Store of the same database and schema, in any process, including this
// one. It is a wake-up, not a queue: PostgreSQL delivers it only to
// listeners connected at the time, and a slow reader may miss payloads, so
// the store stays the source of truth and a woken reader re-reads it.
// Payloads longer than MaxPayload bytes or with NUL bytes fail with
// store.ErrInvalid.
func (s *Store) Notify(ctx context.Context, channel, payload string) error {
	if err := s.usable(); err != nil {
		return err
	}
	name, err := s.channelName(channel)
	if err != nil {
		return err
	}
	if len(payload) > MaxPayload || strings.ContainsRune(payload, 0) {
		return rules.Invalid("notification payload of %d bytes: want at most %d, without NUL", len(payload), MaxPayload)
	}
	_, err = s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, name, payload)
	return mapErr(err)
}

// Listen subscribes to channel and returns the channel on which its
// payloads arrive, in the order they were committed. When Listen returns,
// the subscription is active on the server: a Notify that starts after it
// is delivered. The subscription ends, and the returned channel is closed,
// when ctx is done or the Store is closed.
//
// All subscriptions of a Store share one dedicated connection (not one of
// the pool's). If it breaks, the Store reconnects with backoff and sends
// every subscription an empty payload, since notifications sent in between
// are lost: on any payload, re-read the store.
func (s *Store) Listen(ctx context.Context, channel string) (<-chan string, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	name, err := s.channelName(channel)
	if err != nil {
		return nil, err
	}
	return s.lis.subscribe(ctx, name)
}
