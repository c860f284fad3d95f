package scripted

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/stepwise-run/stepwise/internal/yamlnode"
	"os"

	"gopkg.in/yaml.v3"

	"github.com/stepwise-run/stepwise/steptype"
)

// Load reads and parses the script file at path; see Parse.
func Load(path string) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load script: %w", err)
	}
	return Parse(path, data)
}

// Parse parses a script (YAML, or JSON, which is recognised by a .json
// extension or a leading '{' or '['). name is the file name: errors start
// with it ("demo.yaml:7: turns[2].delay: …") and the model is called
// "scripted:" + its base name without extension ("scripted:demo"). Every
// problem found is reported, as *ParseError values joined with errors.Join.
func Parse(name string, data []byte) (*Model, error) {
	s, err := parseScript(name, data)
	if err != nil {
		return nil, err
	}
	return New(baseName(name), *s), nil
}

func parseScript(file string, data []byte) (*Script, error) {
	root, err := yamlnode.Document(file, data)
	if err != nil {
		return nil, err
	}
	d := &decoder{yamlnode.NewDecoder(file)}
	s := &Script{}
	var turnsNode, groupsNode *yaml.Node
	if root.Kind == yaml.SequenceNode {
		turnsNode = root
		s.Turns = d.turns(root, "turns")
	} else {
		d.Object(root, "", func(key string, v *yaml.Node, f string) bool {
			switch key {
			case "turns":
				turnsNode, s.Turns = v, d.turns(v, f)
			case "user_turns":
				groupsNode = v
				d.List(v, f, func(_ int, v *yaml.Node, f string) {
					s.UserTurns = append(s.UserTurns, d.userTurn(v, f))
				})
			case "loop":
				s.Loop = d.Boolean(v, f)
			case "strict":
				s.Strict = d.Boolean(v, f)
			default:
				return false
			}
			return true
		})
	}
	switch {
	case d.Failed():
	case turnsNode != nil && groupsNode != nil:
		d.Errorf(groupsNode, "user_turns", "cannot be combined with turns")
	case turnsNode == nil && groupsNode == nil:
		d.Errorf(root, "", "script needs turns or user_turns")
	case turnsNode != nil && len(s.Turns) == 0:
		d.Errorf(turnsNode, "turns", "must list at least one turn")
	case groupsNode != nil && len(s.UserTurns) == 0:
		d.Errorf(groupsNode, "user_turns", "must list at least one entry")
	}
	if d.Failed() {
		return nil, d.Err()
	}
	return s, nil
}

func (d *decoder) turns(n *yaml.Node, field string) []Turn {
	var out []Turn
	d.List(n, field, func(_ int, v *yaml.Node, f string) {
		out = append(out, d.turn(v, f))
	})
	return out
}

func (d *decoder) userTurn(n *yaml.Node, field string) UserTurn {
	var u UserTurn
	var turns *yaml.Node
	d.Object(n, field, func(key string, v *yaml.Node, f string) bool {
		switch key {
		case "match":
			if u.Match = d.Str(v, f); u.Match == "" {
				d.Errorf(v, f, "must not be empty")
			}
		case "turns":
			turns, u.Turns = v, d.turns(v, f)
		case "loop":
			u.Loop = d.Boolean(v, f)
		default:
			return false
		}
		return true
	})
	if turns == nil || len(u.Turns) == 0 {
		at := n
		if turns != nil {
			at = turns
		}
		d.Errorf(at, yamlnode.Join(field, "turns"), "must list at least one turn")
	}
	return u
}

func (d *decoder) turn(n *yaml.Node, field string) Turn {
	t := Turn{Line: n.Line}
	if r := d.Resolve(n); r != nil && r.Kind == yaml.ScalarNode && r.ShortTag() == "!!str" {
		t.Text = r.Value // shorthand: a string is a text turn
		return t
	}
	set := false
	d.Object(n, field, func(key string, v *yaml.Node, f string) bool {
		switch key {
		case "text":
			t.Text, set = d.Str(v, f), true
		case "reasoning":
			t.Reasoning, set = d.Str(v, f), true
		case "tool_calls":
			set = true
			d.List(v, f, func(_ int, v *yaml.Node, f string) {
				t.ToolCalls = append(t.ToolCalls, d.toolCall(v, f))
			})
		case "error":
			set = true
			t.Fail = d.failure(v, f)
		case "usage":
			d.Object(v, f, func(key string, v *yaml.Node, f string) bool {
				const want = "a non-negative integer"
				switch key {
				case "input_tokens":
					t.Usage.InputTokens = d.Integer(v, f, 0, 1<<53, want)
				case "output_tokens":
					t.Usage.OutputTokens = d.Integer(v, f, 0, 1<<53, want)
				case "cached_tokens":
					t.Usage.CachedTokens = d.Integer(v, f, 0, 1<<53, want)
				case "reasoning_tokens":
					t.Usage.ReasoningTokens = d.Integer(v, f, 0, 1<<53, want)
				default:
					return false
				}
				return true
			})
		case "chunk":
			// In files, 0 means one delta; absent means DefaultChunk.
			if t.Chunk = int(d.Integer(v, f, 0, 1<<30, "a non-negative integer")); t.Chunk == 0 {
				t.Chunk = -1
			}
		case "delay":
			t.Delay = d.Duration(v, f)
		case "chunk_delay":
			t.ChunkDelay = d.Duration(v, f)
		case "match":
			if t.Match = d.Str(v, f); t.Match == "" {
				d.Errorf(v, f, "must not be empty")
			}
		case "repeat":
			t.Repeat = int(d.Integer(v, f, 1, 1<<30, "a positive integer"))
		default:
			return false
		}
		return true
	})
	if r := d.Resolve(n); !set && r != nil && r.Kind == yaml.MappingNode {
		d.Errorf(n, field, "turn needs text, reasoning, tool_calls or error")
	}
	return t
}

func (d *decoder) toolCall(n *yaml.Node, field string) steptype.ToolCall {
	var tc steptype.ToolCall
	named := false
	d.Object(n, field, func(key string, v *yaml.Node, f string) bool {
		switch key {
		case "name":
			named = true
			if tc.Name = d.Str(v, f); tc.Name == "" {
				d.Errorf(v, f, "must not be empty")
			}
		case "id":
			tc.ID = d.Str(v, f)
		case "arguments":
			tc.Arguments = d.arguments(v, f)
		default:
			return false
		}
		return true
	})
	if !named {
		d.Errorf(n, yamlnode.Join(field, "name"), "required")
	}
	return tc
}

// arguments accepts a mapping or a string holding a JSON object.
func (d *decoder) arguments(n *yaml.Node, field string) json.RawMessage {
	r := d.Resolve(n)
	switch {
	case r == nil || yamlnode.IsNull(r):
		return nil
	case r.Kind == yaml.MappingNode:
		b, ok := d.jsonValue(nil, r, field)
		if !ok {
			return nil
		}
		return b
	case r.Kind == yaml.ScalarNode && r.ShortTag() == "!!str":
		var buf bytes.Buffer
		t := bytes.TrimSpace([]byte(r.Value))
		if len(t) == 0 || t[0] != '{' || json.Compact(&buf, t) != nil {
			d.Errorf(r, field, "must be a JSON object")
			return nil
		}
		return buf.Bytes()
	}
	d.Errorf(r, field, "must be a mapping or a string holding a JSON object")
	return nil
}

func (d *decoder) failure(n *yaml.Node, field string) *Failure {
	f := &Failure{}
	status := false
	d.Object(n, field, func(key string, v *yaml.Node, p string) bool {
		switch key {
		case "status":
			status = true
			f.Status = int(d.Integer(v, p, 400, 599, "an HTTP error status (400–599)"))
		case "message":
			f.Message = d.Str(v, p)
		case "retry_after":
			f.RetryAfter = d.Duration(v, p)
		case "times":
			f.Times = int(d.Integer(v, p, 0, 1<<30, "a non-negative integer"))
		case "after":
			f.After = int(d.Integer(v, p, 0, 1<<30, "a non-negative integer"))
		default:
			return false
		}
		return true
	})
	if !status {
		d.Errorf(n, yamlnode.Join(field, "status"), "required")
	}
	return f
}
