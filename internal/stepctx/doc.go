// Package stepctx is the context a step's handler runs under: the answers
// of context.WithTimeoutCause, made only when the handler asks for what
// needs them.
package stepctx
