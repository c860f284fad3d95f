package tool

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/stepwise-run/stepwise/llm"
)

// ErrDuplicateTool is returned when a Set already has a tool of that name.
var ErrDuplicateTool = errors.New("stepwise: duplicate tool name")

// ErrInvalidToolName is returned for a tool name providers would refuse.
var ErrInvalidToolName = errors.New("stepwise: invalid tool name")

// validName is the tool-name syntax every major provider accepts.
var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Set is an ordered collection of tools with unique names. The zero value
// is an empty set ready to use; it is safe for concurrent use.
type Set struct {
	mu     sync.RWMutex
	tools  []Tool
	byName map[string]Tool
}

// NewSet returns a set of tools, in order. It fails like [Set.Add].
func NewSet(tools ...Tool) (*Set, error) {
	s := &Set{}
	if err := s.Add(tools...); err != nil {
		return nil, err
	}
	return s, nil
}

// Add appends tools. It refuses, adding none of them, a nil tool, a name
// that is not 1–64 characters of [A-Za-z0-9_-] (ErrInvalidToolName), and a
// name already in the set or repeated among tools (ErrDuplicateTool).
func (s *Set) Add(tools ...Tool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make(map[string]bool, len(tools))
	for i, t := range tools {
		if t == nil {
			return fmt.Errorf("add tool %d: nil tool", i)
		}
		name := t.Definition().Name
		if !validName.MatchString(name) {
			return fmt.Errorf("%w %q: use 1-64 letters, digits, '_' or '-'", ErrInvalidToolName, name)
		}
		if _, dup := s.byName[name]; dup || seen[name] {
			return fmt.Errorf("%w %q", ErrDuplicateTool, name)
		}
		seen[name] = true
	}
	if s.byName == nil {
		s.byName = make(map[string]Tool, len(tools))
	}
	for _, t := range tools {
		s.tools = append(s.tools, t)
		s.byName[t.Definition().Name] = t
	}
	return nil
}

// Get returns the tool named name.
func (s *Set) Get(name string) (Tool, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.byName[name]
	return t, ok
}

// Len returns the number of tools.
func (s *Set) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.tools)
}

// Tools returns the tools in the order they were added.
func (s *Set) Tools() []Tool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]Tool(nil), s.tools...)
}

// Defs returns the definitions of the tools, in order, for an llm.Request.
func (s *Set) Defs() []llm.ToolDef {
	s.mu.RLock()
	defer s.mu.RUnlock()
	defs := make([]llm.ToolDef, len(s.tools))
	for i, t := range s.tools {
		defs[i] = t.Definition()
	}
	return defs
}

// Call runs c with the tool named c.Name. An unknown name gives an error
// result listing the available tools, so the model can correct itself.
func (s *Set) Call(ctx context.Context, c *Call) (*Result, error) {
	t, ok := s.Get(c.Name)
	if !ok {
		return ErrorResult(fmt.Errorf("unknown tool %q; available tools: %s", c.Name, strings.Join(s.names(), ", "))), nil
	}
	return t.Call(ctx, c)
}

func (s *Set) names() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, len(s.tools))
	for i, t := range s.tools {
		names[i] = t.Definition().Name
	}
	return names
}
