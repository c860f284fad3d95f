package builtin

import (
	"context"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // IANA zones even on hosts without a zoneinfo database

	"github.com/stepwise-run/stepwise/tool"
)

// ClockConfig configures [NewClock].
type ClockConfig struct {
	// Name is the tool name. Default "clock".
	Name string
	// Now returns the current time. Default time.Now; inject a fixed clock
	// in tests and replays.
	Now func() time.Time
	// DefaultTimezone is the IANA zone used when the model names none.
	// Default "UTC".
	DefaultTimezone string
}

// WithDefaults returns c with zero fields set to their defaults.
func (c ClockConfig) WithDefaults() ClockConfig {
	if c.Name == "" {
		c.Name = "clock"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.DefaultTimezone == "" {
		c.DefaultTimezone = "UTC"
	}
	return c
}

// ClockArgs are the clock's arguments.
type ClockArgs struct {
	Timezone string `json:"timezone,omitempty" jsonschema:"IANA time zone name such as Europe/Paris or America/New_York; default UTC"`
}

// ClockResult is the clock's result.
type ClockResult struct {
	Time         string `json:"time"` // RFC 3339 with the zone's offset
	Timezone     string `json:"timezone"`
	Abbreviation string `json:"abbreviation"` // e.g. CEST
	UTCOffset    string `json:"utc_offset"`   // e.g. +02:00
	Weekday      string `json:"weekday"`
	Unix         int64  `json:"unix"`
}

// NewClock returns a tool that tells the current time in an IANA time zone.
// The zone database is embedded, so every zone works on any host.
func NewClock(cfg ClockConfig) (tool.Tool, error) {
	cfg = cfg.WithDefaults()
	if _, err := loadZone(cfg.DefaultTimezone); err != nil {
		return nil, fmt.Errorf("clock: default timezone: %w", err)
	}
	return tool.New(cfg.Name, "Current date and time in a time zone.",
		func(ctx context.Context, a ClockArgs) (ClockResult, error) {
			name := a.Timezone
			if name == "" {
				name = cfg.DefaultTimezone
			}
			loc, err := loadZone(name)
			if err != nil {
				return ClockResult{}, err
			}
			now := cfg.Now().In(loc)
			abbr, _ := now.Zone()
			return ClockResult{
				Time:         now.Format(time.RFC3339),
				Timezone:     loc.String(),
				Abbreviation: abbr,
				UTCOffset:    now.Format("-07:00"),
				Weekday:      now.Weekday().String(),
				Unix:         now.Unix(),
			}, nil
		}), nil
}

// loadZone loads an IANA zone, refusing "Local" (the host's zone means
// nothing to the model) with a message that suggests the expected form.
func loadZone(name string) (*time.Location, error) {
	if strings.EqualFold(name, "local") {
		return nil, fmt.Errorf("unknown time zone %q: use an IANA name such as Europe/Paris", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q: use an IANA name such as Europe/Paris", name)
	}
	return loc, nil
}
