// Package client is the Go client of a Stepwise server (package server). It
// mirrors the in-process API: Client implements stepwise.Client (Initiate,
// NextStep over the long-poll endpoint, ProvideHumanInput), typed methods
// cover the rest of the API, and Subscribe streams events as
// iter.Seq2[*stepwise.Event, error], reconnecting on its own with the last
// event id so that no event is lost or repeated across disconnects.
//
//	c, err := client.New("http://127.0.0.1:7700", client.WithToken(tok))
//	inv, err := c.Initiate(ctx, "support", "Where is my order?")
//	for {
//		step, err := c.NextStep(ctx, inv)
//		…
//	}
//
// Errors returned by the server are *Error values that match the stepwise
// sentinels with errors.Is (a 404 is stepwise.ErrNotFound, an answer given
// twice is stepwise.ErrAlreadyAnswered, and so on).
//
// The requests and responses are the types of package wire, which the
// server encodes; the root package names the same types (stepwise.Event is
// wire.Event), so code written against the engine reads them unchanged.
// Of this module the client imports only wire and steptype: a program that
// talks to a server links no engine.
package client
