package store

// Driver is every capability the product uses from a store: the step log
// (Store), the observation data (ObservationStore), step vectors
// (VectorStore), time-series analytics (MetricsStore) and verbatim import
// and export for `stepwise copy` (Importer, Exporter) and context
// checkpoints (ContextCheckpointStore). The engine needs only Store; the server, evals, the
// recorder and step memory find the others with type assertions. Every
// driver shipped with Stepwise (memory, SQLite, PostgreSQL) implements
// Driver, asserted at compile time in each driver, and the conformance
// suite (store/storetest) fails a driver that lacks a part.
type Driver interface {
	Store
	ObservationStore
	VectorStore
	MetricsStore
	Importer
	Exporter
	ContextCheckpointStore
}
