package tool

import "context"

type callKey struct{}

// WithCall returns a context carrying c; tools built with [New] and [Func]
// set it before calling their function, so typed functions can read the
// call's IdempotencyKey, ids and attempt with [CallFrom].
func WithCall(ctx context.Context, c *Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// CallFrom returns the call being executed, if ctx carries one.
func CallFrom(ctx context.Context) (*Call, bool) {
	c, ok := ctx.Value(callKey{}).(*Call)
	return c, ok && c != nil
}
