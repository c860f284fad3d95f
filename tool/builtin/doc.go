// Package builtin provides ready-made tools: a calculator, a clock, files
// confined to a root directory, and an HTTP GET limited to an allow-list of
// hosts. Each has a constructor taking a Config whose zero fields get
// documented defaults, and refuses unsafe input with an error the model can
// read.
package builtin
