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
	// Prefilter, when set, is a cheap test that text may hold a match; the
	// pattern only runs where it returns true.
	Prefilter func(text string) bool
	// Candidates, when set, returns the spans of text that may hold a
	// match, in order; the pattern runs on them only (each widened by one
	// character for word boundaries). Go's regexp engine scans long text
	// slowly; this keeps masking cheap on the commit path.
	Candidates func(text string) [][2]int
}

// DefaultRules mask e-mail addresses, payment card numbers (13 to 19 digits,
// optionally grouped by spaces or dashes, Luhn-checked so that order numbers
// and timestamps survive) and API keys and bearer tokens.
func DefaultRules() []Rule {
	rules := []Rule{
		{Name: "email", Pattern: regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`),
			Candidates: emailSpans},
		{Name: "card", Pattern: regexp.MustCompile(`\b\d(?:[ -]?\d){12,18}\b`), Check: luhn, Candidates: digitSpans},
	}
	for _, sec := range secrets {
		rules = append(rules, Rule{Name: "key", Pattern: sec.re,
			Prefilter: func(s string) bool { return mayContain(s, sec.literals, sec.fold) }})
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
	for i := range m.cfg.Rules {
		r := &m.cfg.Rules[i]
		if r.Prefilter != nil && !r.Prefilter(s) {
			continue
		}
		if r.Candidates == nil {
			if r.Pattern.MatchString(s) {
				s = r.Pattern.ReplaceAllStringFunc(s, r.replace)
			}
			continue
		}
		spans := r.Candidates(s)
		if len(spans) == 0 {
			continue
		}
		var b strings.Builder
		last := 0
		for _, sp := range spans {
			lo, hi := max(sp[0]-1, last), min(sp[1]+1, len(s))
			if lo >= hi {
				continue
			}
			b.WriteString(s[last:lo])
			b.WriteString(r.Pattern.ReplaceAllStringFunc(s[lo:hi], r.replace))
			last = hi
		}
		b.WriteString(s[last:])
		s = b.String()
	}
	return s
}

// replace is the replacement of one match.
func (r *Rule) replace(match string) string {
	if r.Check != nil && !r.Check(match) {
		return match
	}
	if scheme, _, ok := strings.Cut(match, " "); ok && r.Name == "key" && len(scheme) <= 6 {
		return scheme + " " + r.Replacement // keep "Bearer "
	}
	return r.Replacement
}

// emailSpans returns the spans around each "@" that an address can cover.
func emailSpans(s string) [][2]int {
	var spans [][2]int
	for i := 0; i < len(s); i++ {
		if s[i] != '@' {
			continue
		}
		lo, hi := i, i+1
		for lo > 0 && localChar(s[lo-1]) {
			lo--
		}
		for hi < len(s) && (alnum(s[hi]) || s[hi] == '.' || s[hi] == '-') {
			hi++
		}
		if n := len(spans); n > 0 && spans[n-1][1] >= lo {
			spans[n-1][1] = hi
		} else {
			spans = append(spans, [2]int{lo, hi})
		}
		i = hi - 1
	}
	return spans
}

// digitSpans returns the runs of digits, spaces and dashes with 13 digits
// or more: where a card number can be.
func digitSpans(s string) [][2]int {
	var spans [][2]int
	start, digits := -1, 0
	flush := func(end int) {
		if start >= 0 && digits >= 13 {
			spans = append(spans, [2]int{start, end})
		}
		start, digits = -1, 0
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			if start < 0 {
				start = i
			}
			digits++
		case (c == ' ' || c == '-') && start >= 0:
		default:
			flush(i)
		}
	}
	flush(len(s))
	return spans
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func localChar(c byte) bool {
	return alnum(c) || strings.IndexByte("._%+-", c) >= 0
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
