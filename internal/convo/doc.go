// Package convo builds the model context of a run: the Conversation of a
// session's message-bearing steps with running token counts and a message
// hash chain (canonical JSON), its window under a token budget, and the
// context checkpoints a Loader starts from so that a build reads only what
// the model can see.
package convo
