// Package stepres measures what a step costs the machine: the process's
// CPU time and heap allocation between a step's start and its end, and how
// many other steps of the process ran meanwhile.
//
// The Go runtime keeps neither CPU time nor allocation per goroutine, so
// both are the process's deltas over the step's span: exact for a step
// that ran alone (Overlapping 0) but for the runtime's and the program's
// background work (the garbage collector, a server's requests), and an
// upper bound shared with the overlapping steps otherwise.
package stepres
