package agentfile

import (
	"github.com/stepwise-run/stepwise/internal/yamlnode"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

func (d *decoder) modelOptions(n *yaml.Node, field string) ModelOptions {
	var o ModelOptions
	d.Object(n, field, func(key string, v *yaml.Node, f string) bool {
		switch key {
		case "base_url":
			if o.BaseURL = d.Str(v, f); !httpURL(o.BaseURL) {
				d.Errorf(v, f, "must be an http or https URL")
			}
		case "api_key_env":
			if o.APIKeyEnv = d.Str(v, f); !envName.MatchString(o.APIKeyEnv) {
				d.Errorf(v, f, "must be an environment variable name such as OPENAI_API_KEY")
			}
		case "temperature":
			if r := d.Resolve(v); r != nil && !yamlnode.IsNull(r) {
				t := d.float(v, f, 0, 2, "a number from 0 to 2")
				o.Temperature = &t
			}
		case "max_tokens":
			o.MaxTokens = d.positive(v, f)
		case "timeout":
			o.Timeout = d.positiveDuration(v, f)
		default:
			return false
		}
		return true
	})
	return o
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func (d *decoder) tools(n *yaml.Node, field, dir string) []Tool {
	var out []Tool
	seen := map[string]bool{}
	d.List(n, field, func(_ int, v *yaml.Node, f string) {
		r := d.Resolve(v)
		if r == nil {
			return
		}
		var t Tool
		var config *yaml.Node
		switch {
		case r.Kind == yaml.ScalarNode && r.ShortTag() == "!!str":
			t.Name = r.Value
		case r.Kind == yaml.MappingNode && len(r.Content) == 2:
			k := d.Resolve(r.Content[0])
			if k == nil || k.Kind != yaml.ScalarNode {
				d.Errorf(r, f, "must be a tool name or a mapping of one tool name to its configuration")
				return
			}
			t.Name, config = k.Value, r.Content[1]
		default:
			d.Errorf(r, f, "must be a tool name or a mapping of one tool name to its configuration")
			return
		}
		if !slices.Contains(BuiltinTools, t.Name) {
			d.Errorf(r, f, "unknown tool %q (want one of %s)", t.Name, strings.Join(BuiltinTools, ", "))
			return
		}
		if seen[t.Name] {
			d.Errorf(r, f, "duplicate tool %q", t.Name)
			return
		}
		seen[t.Name] = true
		f = yamlnode.Join(f, t.Name)
		d.Object(config, f, func(key string, v *yaml.Node, f string) bool {
			switch {
			case t.Name == ToolFiles && key == "root":
				if root := d.Str(v, f); root != "" {
					t.Root = resolve(dir, root)
				} else {
					d.Errorf(v, f, "must not be empty")
				}
			case t.Name == ToolHTTPGet && key == "allow_hosts":
				t.AllowHosts = d.strList(v, f, `a host such as "api.example.com", "*.example.com", "localhost:8080" or "*"`,
					func(h string) bool { return hostRule.MatchString(strings.ToLower(h)) })
			default:
				return false
			}
			return true
		})
		switch {
		case t.Name == ToolFiles && t.Root == "" && !hasKey(config, "root"):
			d.Errorf(r, yamlnode.Join(f, "root"), "required: the directory the files tool works in")
		case t.Name == ToolHTTPGet && len(t.AllowHosts) == 0 && !hasKey(config, "allow_hosts"):
			d.Errorf(r, yamlnode.Join(f, "allow_hosts"), `required: the hosts http_get may fetch ("*" for any)`)
		case t.Name == ToolHTTPGet && len(t.AllowHosts) == 0:
			d.Errorf(r, yamlnode.Join(f, "allow_hosts"), `must list at least one host ("*" for any)`)
		}
		out = append(out, t)
	})
	return out
}

// hasKey reports whether mapping n has key (so a missing key is reported once).
func hasKey(n *yaml.Node, key string) bool {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil || n.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return true
		}
	}
	return false
}

func (d *decoder) mcpServers(n *yaml.Node, field, dir string) []MCPServer {
	var out []MCPServer
	seen := map[string]bool{}
	d.List(n, field, func(_ int, v *yaml.Node, f string) {
		var s MCPServer
		named := false
		d.Object(v, f, func(key string, v *yaml.Node, f string) bool {
			switch key {
			case "name":
				named = true
				switch s.Name = d.Str(v, f); {
				case !validName(s.Name):
					d.Errorf(v, f, "must be 1–64 characters of a-z, 0-9, _ and -")
				case seen[s.Name]:
					d.Errorf(v, f, "duplicate server name %q", s.Name)
				}
				seen[s.Name] = true
			case "command":
				if s.Command = d.Str(v, f); s.Command == "" {
					d.Errorf(v, f, "must not be empty")
				} else if strings.ContainsAny(s.Command, `/\`) {
					// Keep a separator, so that "./server.py" next to a file
					// given as "agent.yaml" (Dir ".") is not cleaned to a
					// bare name looked up in PATH.
					s.Command = withSlash(resolve(dir, s.Command))
				}
			case "args":
				d.List(v, f, func(_ int, v *yaml.Node, f string) {
					if sc := d.Scalar(v, f, "a string"); sc != nil {
						s.Args = append(s.Args, sc.Value)
					}
				})
			case "env":
				s.Env = d.stringMap(v, f, "an environment variable name", envName.MatchString)
			case "url":
				if s.URL = d.Str(v, f); !httpURL(s.URL) {
					d.Errorf(v, f, "must be an http or https URL")
				}
			case "headers":
				s.Headers = d.stringMap(v, f, "an HTTP header name", headerName.MatchString)
			case "elicitation":
				s.Elicitation = d.Boolean(v, f)
			default:
				return false
			}
			return true
		})
		r := d.Resolve(v)
		if r == nil || r.Kind != yaml.MappingNode {
			return
		}
		if !named {
			d.Errorf(r, yamlnode.Join(f, "name"), "required")
		}
		hasCmd, hasURL := hasKey(r, "command"), hasKey(r, "url")
		switch {
		case hasCmd && hasURL:
			d.Errorf(r, f, "set command or url, not both")
		case !hasCmd && !hasURL:
			d.Errorf(r, f, "needs command (stdio) or url (HTTP)")
		case hasURL && (len(s.Args) > 0 || len(s.Env) > 0):
			d.Errorf(r, f, "args and env need command")
		case hasCmd && len(s.Headers) > 0:
			d.Errorf(r, yamlnode.Join(f, "headers"), "need url")
		}
		out = append(out, s)
	})
	return out
}

func (d *decoder) limits(n *yaml.Node, field string) Limits {
	var l Limits
	d.Object(n, field, func(key string, v *yaml.Node, f string) bool {
		switch key {
		case "max_steps":
			l.MaxSteps = d.positive(v, f)
		case "step_timeout":
			l.StepTimeout = d.positiveDuration(v, f)
		case "run_timeout":
			l.RunTimeout = d.positiveDuration(v, f)
		case "max_parallel_tools":
			l.MaxParallelTools = d.positive(v, f)
		case "max_depth":
			l.MaxDepth = d.positive(v, f)
		default:
			return false
		}
		return true
	})
	return l
}

func (d *decoder) retry(n *yaml.Node, field string) Retry {
	var r Retry
	var maxNode *yaml.Node
	d.Object(n, field, func(key string, v *yaml.Node, f string) bool {
		switch key {
		case "max_attempts":
			r.MaxAttempts = d.positive(v, f)
		case "initial_interval":
			r.InitialInterval = d.positiveDuration(v, f)
		case "max_interval":
			maxNode, r.MaxInterval = v, d.positiveDuration(v, f)
		default:
			return false
		}
		return true
	})
	if r.MaxInterval > 0 && r.MaxInterval < r.InitialInterval {
		d.Errorf(maxNode, yamlnode.Join(field, "max_interval"), "must not be below initial_interval (%s)", r.InitialInterval)
	}
	return r
}

func (d *decoder) approvals(n *yaml.Node, field string) map[string]Approval {
	var out map[string]Approval
	d.Object(n, field, func(key string, v *yaml.Node, f string) bool {
		if !toolName.MatchString(key) {
			d.Errorf(v, f, `key must be a tool name or "*"`)
			return true
		}
		switch a := Approval(d.Str(v, f)); a {
		case ApprovalAlways, ApprovalNever:
			if out == nil {
				out = make(map[string]Approval)
			}
			out[key] = a
		default:
			d.Errorf(v, f, `must be "always" or "never"`)
		}
		return true
	})
	return out
}

func (d *decoder) contextPolicy(n *yaml.Node, field string) ContextPolicy {
	var c ContextPolicy
	d.Object(n, field, func(key string, v *yaml.Node, f string) bool {
		switch key {
		case "token_budget":
			if v.Kind == yaml.ScalarNode && v.Value == "none" {
				c.TokenBudget = NoTokenBudget
				break
			}
			c.TokenBudget = d.positive(v, f)
		case "strategy":
			switch c.Strategy = d.Str(v, f); c.Strategy {
			case StrategyTrim, StrategySummarize:
			default:
				d.Errorf(v, f, `must be "trim" or "summarize"`)
			}
		default:
			return false
		}
		return true
	})
	return c
}

func (d *decoder) prices(n *yaml.Node, field string) map[string]Price {
	var out map[string]Price
	d.Object(n, field, func(model string, v *yaml.Node, f string) bool {
		if model == "" || strings.ContainsAny(model, " \t\n") {
			d.Errorf(v, f, "key must be a model string")
			return true
		}
		f = field + "[" + strconv.Quote(model) + "]"
		var p Price
		const want = "a non-negative number (USD per million tokens)"
		d.Object(v, f, func(key string, v *yaml.Node, f string) bool {
			switch key {
			case "input":
				p.Input = d.float(v, f, 0, 1e9, want)
			case "output":
				p.Output = d.float(v, f, 0, 1e9, want)
			case "cached":
				p.Cached = d.float(v, f, 0, 1e9, want)
			default:
				return false
			}
			return true
		})
		if out == nil {
			out = make(map[string]Price)
		}
		out[model] = p
		return true
	})
	return out
}

func (d *decoder) breakpoints(n *yaml.Node, field string) Breakpoints {
	var b Breakpoints
	want := `a step name, a kind, a tool name, "*", or step:NAME, kind:KIND, tool:NAME`
	d.Object(n, field, func(key string, v *yaml.Node, f string) bool {
		switch key {
		case "before":
			b.Before = d.strList(v, f, want, breakSel.MatchString)
		case "after":
			b.After = d.strList(v, f, want, breakSel.MatchString)
		default:
			return false
		}
		return true
	})
	return b
}
