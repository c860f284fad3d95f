package postgres

import (
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stepwise-run/stepwise/store"
)

// Config configures Open. The zero value of every field but DSN is a
// documented default.
type Config struct {
	// DSN is the PostgreSQL connection string, as a URL
	// ("postgres://user:pass@host:5432/db?sslmode=disable") or in key=value
	// form, with every parameter pgx understands. Required.
	DSN string
	// Schema holds the store's tables. Open creates it when missing and
	// sets search_path to it alone on every connection of the store, so
	// several stores can share one database in different schemas; stores
	// with the same DSN database and Schema share their data and their
	// notification channels. Default: the DSN's search_path parameter when
	// it names a single schema, else "public".
	Schema string
	// MaxConns bounds the connection pool. Default: the DSN's
	// pool_max_conns parameter when it sets one (so `stepwise serve --db
	// postgres://…?pool_max_conns=50` sizes the server's pool), else 10.
	// Listen uses one more, dedicated connection, opened on the first
	// Listen.
	MaxConns int32
	// ConnectTimeout bounds each connection attempt, and so Open against a
	// server that does not answer. Default: the DSN's connect_timeout, else
	// 10s.
	ConnectTimeout time.Duration
	// Retries is how many times a transaction that failed with a
	// serialization failure or a deadlock (SQLSTATE 40001, 40P01) is run
	// again before the call fails with store.ErrConflict. Default 5.
	Retries int
}

// Defaults.
const (
	DefaultSchema         = "public"
	DefaultMaxConns       = 10
	DefaultConnectTimeout = 10 * time.Second
	DefaultRetries        = 5
)

// maxIdentifier is PostgreSQL's identifier limit (NAMEDATALEN - 1 bytes).
const maxIdentifier = 63

// WithDefaults returns c with its zero numeric fields set to their
// defaults. Schema, MaxConns and ConnectTimeout depend on the DSN and are
// settled by Open (see their documentation).
func (c Config) WithDefaults() Config {
	if c.Retries == 0 {
		c.Retries = DefaultRetries
	}
	return c
}

// validate reports a configuration error wrapping store.ErrInvalid.
func (c Config) validate() error {
	switch {
	case c.DSN == "":
		return fmt.Errorf("%w: postgres: Config.DSN is required", store.ErrInvalid)
	case len(c.Schema) > maxIdentifier:
		return fmt.Errorf("%w: postgres: Config.Schema %q is longer than %d bytes", store.ErrInvalid, c.Schema, maxIdentifier)
	case strings.ContainsRune(c.Schema, 0):
		return fmt.Errorf("%w: postgres: Config.Schema contains a NUL byte", store.ErrInvalid)
	case c.MaxConns < 0:
		return fmt.Errorf("%w: postgres: negative Config.MaxConns %d", store.ErrInvalid, c.MaxConns)
	case c.ConnectTimeout < 0:
		return fmt.Errorf("%w: postgres: negative Config.ConnectTimeout %v", store.ErrInvalid, c.ConnectTimeout)
	case c.Retries < 0:
		return fmt.Errorf("%w: postgres: negative Config.Retries %d", store.ErrInvalid, c.Retries)
	}
	return nil
}

// poolConfig parses the DSN and returns the pool configuration and the
// schema to use: every connection gets search_path = schema.
func (c Config) poolConfig() (*pgxpool.Config, string, error) {
	pc, err := pgxpool.ParseConfig(c.DSN)
	if err != nil {
		// pgconn redacts the password from its parse errors.
		return nil, "", fmt.Errorf("%w: postgres: Config.DSN: %v", store.ErrInvalid, err)
	}
	schema := c.Schema
	if schema == "" {
		if schema, err = dsnSchema(pc.ConnConfig.RuntimeParams["search_path"]); err != nil {
			return nil, "", err
		}
	}
	switch {
	case c.MaxConns > 0:
		pc.MaxConns = c.MaxConns
	case !strings.Contains(c.DSN, "pool_max_conns="):
		pc.MaxConns = DefaultMaxConns
	}
	if c.ConnectTimeout > 0 || pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = orDefault(c.ConnectTimeout, DefaultConnectTimeout)
	}
	pc.ConnConfig.RuntimeParams["search_path"] = quoteIdent(schema)
	pc.AfterConnect = registerFastArrays
	if pc.ConnConfig.RuntimeParams["application_name"] == "" {
		pc.ConnConfig.RuntimeParams["application_name"] = "stepwise"
	}
	return pc, schema, nil
}

// dsnSchema returns the schema named by a DSN's search_path, or the
// default when it has none.
func dsnSchema(searchPath string) (string, error) {
	sp := strings.TrimSpace(searchPath)
	if sp == "" {
		return DefaultSchema, nil
	}
	if strings.Contains(sp, ",") {
		return "", fmt.Errorf("%w: postgres: the DSN's search_path %q names several schemas; set Config.Schema", store.ErrInvalid, sp)
	}
	if len(sp) >= 2 && sp[0] == '"' && sp[len(sp)-1] == '"' {
		sp = strings.ReplaceAll(sp[1:len(sp)-1], `""`, `"`)
	}
	if len(sp) > maxIdentifier {
		return "", fmt.Errorf("%w: postgres: schema %q is longer than %d bytes", store.ErrInvalid, sp, maxIdentifier)
	}
	return sp, nil
}

func orDefault(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

// quoteIdent quotes a schema or channel name for SQL.
func quoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }
