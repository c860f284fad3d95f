package builtin

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/tool"
)

func TestClock(t *testing.T) {
	t.Parallel()
	fixed := time.Date(2026, 7, 14, 10, 30, 0, 0, time.UTC)
	clock, err := NewClock(ClockConfig{Now: func() time.Time { return fixed }})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args string
		want ClockResult
	}{
		{`{}`, ClockResult{Time: "2026-07-14T10:30:00Z", Timezone: "UTC", Abbreviation: "UTC", UTCOffset: "+00:00", Weekday: "Tuesday", Unix: fixed.Unix()}},
		{`{"timezone":"Europe/Paris"}`, ClockResult{Time: "2026-07-14T12:30:00+02:00", Timezone: "Europe/Paris", Abbreviation: "CEST", UTCOffset: "+02:00", Weekday: "Tuesday", Unix: fixed.Unix()}},
		{`{"timezone":"Pacific/Kiritimati"}`, ClockResult{Time: "2026-07-15T00:30:00+14:00", Timezone: "Pacific/Kiritimati", Abbreviation: "+14", UTCOffset: "+14:00", Weekday: "Wednesday", Unix: fixed.Unix()}},
	} {
		res, err := clock.Call(context.Background(), &tool.Call{Arguments: json.RawMessage(tc.args)})
		if err != nil {
			t.Fatalf("%s: %v", tc.args, err)
		}
		var got ClockResult
		if err := json.Unmarshal(res.Output, &got); err != nil || got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.args, got, tc.want)
		}
	}
}

func TestClockRefusesUnknownZones(t *testing.T) {
	t.Parallel()
	clock, err := NewClock(ClockConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tz := range []string{"Mars/Olympus", "Local", "../../etc/passwd", "Europe/"} {
		args, _ := json.Marshal(ClockArgs{Timezone: tz})
		_, err := clock.Call(context.Background(), &tool.Call{Arguments: args})
		if err == nil || !strings.Contains(err.Error(), "unknown time zone") {
			t.Errorf("%q: err = %v", tz, err)
		}
	}
	if _, err := NewClock(ClockConfig{DefaultTimezone: "Nowhere/Town"}); err == nil {
		t.Error("bad DefaultTimezone accepted")
	}
}

func TestClockDefaultZone(t *testing.T) {
	t.Parallel()
	clock, err := NewClock(ClockConfig{DefaultTimezone: "Asia/Tokyo", Now: func() time.Time { return time.Unix(0, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	res, err := clock.Call(context.Background(), &tool.Call{})
	if err != nil || !strings.Contains(res.Content, `"time":"1970-01-01T09:00:00+09:00"`) {
		t.Errorf("got %+v, %v", res, err)
	}
}
