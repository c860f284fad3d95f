package observe

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/stepwise-run/stepwise"
)

// Rule is one masking pattern.
type Rule struct {
	// Name names what the rule masks ("email"); the default replacement is
	// "[" + Name + "]".
	Name    string
	Pattern *regexp.Regexp
	// Check, when set, confirms a match before it is masked (a Luhn check
	// for card numbers).
	Check func(match string) bool
	// Replacement replaces a match; default "[" + Name + "]".
	Replacement string
}

// DefaultRules mask e-mail addresses, payment card numbers (13 to 19 digits,
// optionally grouped by spaces or dashes, Luhn-checked so that order numbers
// and timestamps survive) and API keys and bearer tokens.
func DefaultRules() []Rule {
	rules := []Rule{
		{Name: "email", Pattern: regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`)},
		{Name: "card", Pattern: regexp.MustCompile(`\b\d(?:[ -]?\d){12,18}\b`), Check: luhn},
	}
	for _, re := range secretPatterns {
		rules = append(rules, Rule{Name: "key", Pattern: re})
	}
	return rules
}

// luhn reports whether the digits of s (separators ignored) pass the Luhn
// checksum, with 13 to 19 digits.
func luhn(s string) bool {
	var digits []int
	for _, r := range s {
		if r >= '0' && r <= '9' {
			digits = append(digits, int(r-'0'))
		}
	}
	if len(digits) < 13 || len(digits) > 19 {
		return false
	}
	sum := 0
	for i := len(digits) - 1; i >= 0; i-- {
		d := digits[i]
		if (len(digits)-1-i)%2 == 1 {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	return sum%10 == 0
}

// MaskConfig configures a Masker.
type MaskConfig struct {
	// Rules are the patterns to mask. Default DefaultRules().
	Rules []Rule
	// ToolArguments also masks the arguments of the tool calls a model asks
	// for. Default false: the committed step is what the tools step executes,
	// so masking them changes what tools receive.
	ToolArguments bool
}

// Masker is the built-in regex masking hook. Register it on an engine with
// e.Mask(m.Step); use m.Text for anything else persisted (step events).
type Masker struct {
	cfg MaskConfig
}

// NewMasker returns a masker.
func NewMasker(cfg MaskConfig) *Masker {
	if cfg.Rules == nil {
		cfg.Rules = DefaultRules()
	}
	for i := range cfg.Rules {
		if cfg.Rules[i].Replacement == "" {
			cfg.Rules[i].Replacement = "[" + cfg.Rules[i].Name + "]"
		}
	}
	return &Masker{cfg: cfg}
}

// Text masks every match of every rule in s.
func (m *Masker) Text(s string) string {
	for _, r := range m.cfg.Rules {
		if !r.Pattern.MatchString(s) {
			continue
		}
		s = r.Pattern.ReplaceAllStringFunc(s, func(match string) string {
			if r.Check != nil && !r.Check(match) {
				return match
			}
			if scheme, _, ok := strings.Cut(match, " "); ok && r.Name == "key" && len(scheme) <= 6 {
				return scheme + " " + r.Replacement // keep "Bearer "
			}
			return r.Replacement
		})
	}
	return s
}

// JSON masks the string values of a JSON document (keys and numbers are
// left), keeping it valid JSON.
func (m *Masker) JSON(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return b
	}
	return rewriteJSON(b, func(_, s string) string { return m.Text(s) })
}

// Step masks a step before it is persisted: content, reasoning, inputs,
// outputs, error and annotations, and the tool-call arguments when
// configured. The run's custom state (StatePatch) and Metadata are program
// data and are left alone. Step has the signature of stepwise.MaskFunc.
func (m *Masker) Step(s *stepwise.Step) {
	s.Content = m.Text(s.Content)
	s.Reasoning = m.Text(s.Reasoning)
	s.Inputs = m.JSON(s.Inputs)
	s.Outputs = m.JSON(s.Outputs)
	if s.Error != nil {
		e := *s.Error
		e.Message, e.Cause = m.Text(e.Message), m.Text(e.Cause)
		s.Error = &e
	}
	a := &s.Annotations
	for _, f := range []*string{&a.State, &a.StateSummary, &a.Goal, &a.GoalSummary, &a.Action, &a.ActionSummary} {
		*f = m.Text(*f)
	}
	if m.cfg.ToolArguments && len(s.ToolCalls) > 0 {
		calls := make([]stepwise.ToolCall, len(s.ToolCalls))
		for i, c := range s.ToolCalls {
			c.Arguments = m.JSON(c.Arguments)
			calls[i] = c
		}
		s.ToolCalls = calls
	}
}
