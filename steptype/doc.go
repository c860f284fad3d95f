// Package steptype holds the record types shared by the Stepwise engine and
// every store driver: Step, Session, Run and their enums, plus the explicit,
// versioned JSON wire format of a step.
//
// It exists so that a store driver never imports the engine (the root
// package), and the engine never imports a driver. Users normally reach these
// types through the aliases in package stepwise.
package steptype
