// Package render writes steps as text for models and people: one numbered
// block per step (User, Assistant, Action, Decision, Call Program and End
// Program, Human Input Request …) from a template per step kind, and the
// trace tool that lets a model read a session rendered that way.
package render
