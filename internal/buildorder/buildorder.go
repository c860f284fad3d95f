// Package buildorder changes nothing at run time: it sets the order in which
// the go command compiles the stepwise binary on an empty build cache (the
// first `go run ./cmd/stepwise` on a fresh machine).
//
// The go command runs the compile actions that are ready in depth-first
// order of the import graph, each package's imports sorted by path. Reached
// only through internal/cli → store/sqlite, the SQLite driver would come
// after about 380 of the binary's 430 packages, so its chain —
// modernc.org/libc, then modernc.org/sqlite/lib, the two longest compiles
// of the build, one after the other — would start last and run while the
// other core had nothing left to do. cmd/stepwise imports this package,
// whose path sorts before internal/cli, so the chain starts as soon as its
// own dependencies are built and the rest of the binary compiles beside it.
// See "First run and binary size" in docs/PERFORMANCE.md;
// TestBinaryBuildOrder in cmd/stepwise keeps it so.
package buildorder

import _ "modernc.org/sqlite" // the database/sql driver store/sqlite registers anyway
