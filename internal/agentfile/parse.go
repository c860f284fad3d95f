package agentfile

import (
	"fmt"
	"github.com/stepwise-run/stepwise/internal/yamlnode"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/stepwise-run/stepwise/steptype"
)

// Load reads and parses the agent file at path; see Parse.
func Load(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load agent file: %w", err)
	}
	return Parse(path, data)
}

// Parse parses an agent file (YAML, or JSON, recognised by a .json
// extension or a leading '{'). filename names the file in errors and its
// directory is the base of relative paths; Parse reads no other file.
// Unknown fields are errors. Every problem found is reported as a
// *ParseError ("agent.yaml:7: limits.max_steps: must be a positive
// integer"), joined with errors.Join.
func Parse(filename string, data []byte) (*Spec, error) {
	root, err := yamlnode.Document(filename, data)
	if err != nil {
		return nil, err
	}
	if root.Kind != yaml.MappingNode {
		return nil, &ParseError{File: filename, Line: root.Line, Msg: "an agent file must be a mapping of fields"}
	}
	d := &decoder{yamlnode.NewDecoder(filename)}
	s := &Spec{File: filename, Dir: filepath.Dir(filename)}
	var named, modeled bool
	d.Object(root, "", func(key string, v *yaml.Node, f string) bool {
		switch key {
		case "name":
			named = true
			if s.Name = d.Str(v, f); !validName(s.Name) {
				d.Errorf(v, f, "must be 1–64 characters of a-z, 0-9, _ and -")
			}
		case "description":
			s.Description = d.Str(v, f)
		case "instructions":
			s.Instructions = d.Str(v, f)
		case "model":
			modeled = true
			s.Model = d.model(v, f, s.Dir)
		case "model_options":
			s.ModelOptions = d.modelOptions(v, f)
		case "tools":
			s.Tools = d.tools(v, f, s.Dir)
		case "mcp_servers":
			s.MCPServers = d.mcpServers(v, f, s.Dir)
		case "sub_agents":
			s.SubAgents, s.A2AAgents = d.subAgents(v, f, s.Dir)
		case "start_step":
			if s.StartStep = d.Str(v, f); !stepName.MatchString(s.StartStep) {
				d.Errorf(v, f, "must be a step name of letters, digits, _ . : and -")
			}
		case "limits":
			s.Limits = d.limits(v, f)
		case "retry":
			s.Retry = d.retry(v, f)
		case "approvals":
			s.Approvals = d.approvals(v, f)
		case "context":
			s.Context = d.contextPolicy(v, f)
		case "embeddings":
			s.Embeddings = d.embeddings(v, f, s.Dir)
		case "prices":
			s.Prices = d.prices(v, f)
		case "reducers":
			s.Reducers = d.reducers(v, f)
		case "on_update":
			s.OnUpdate = d.onUpdate(v, f)
		case "step_map":
			s.StepMap = d.stepMap(v, f)
		case "breakpoints":
			s.Breakpoints = d.breakpoints(v, f)
		case "observe":
			s.Observe = d.observe(v, f, s.Dir)
		case "metadata":
			if r := d.Resolve(v); r != nil && !yamlnode.IsNull(r) && r.Kind != yaml.MappingNode {
				d.Errorf(r, f, "must be a mapping")
			} else if m, ok := d.value(v, f); ok && m != nil {
				s.Metadata = m.(map[string]any)
			}
		default:
			return false
		}
		return true
	})
	if !named {
		d.Errorf(root, "name", "required")
	}
	if !modeled {
		d.Errorf(root, "model", "required")
	}
	if d.Failed() {
		return nil, d.Err()
	}
	return s, nil
}

var (
	agentName = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)
	stepName  = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)
	envName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	toolName  = regexp.MustCompile(`^([A-Za-z0-9_.:/-]{1,128}|\*)$`)
	// A breakpoint selector: a step, kind or tool name, "*", or one of
	// them with its prefix (step:, kind:, tool:).
	breakSel = regexp.MustCompile(`^(\*|((step|kind|tool):)?[A-Za-z0-9_./-][A-Za-z0-9_.:/-]{0,127})$`)
	// An HTTP header name is an RFC 9110 token.
	headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	hostRule   = regexp.MustCompile(`^(\*|(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:[0-9]{1,5})?|\[[0-9a-f:.]+\](:[0-9]{1,5})?)$`)
	modelID    = regexp.MustCompile(`^[^\s]+$`)
)

func validName(s string) bool { return agentName.MatchString(s) }

// withSlash returns a path that names a file, never a program to look up
// in PATH: a bare name gets a "./" prefix.
func withSlash(p string) string {
	if filepath.IsAbs(p) || strings.ContainsRune(p, filepath.Separator) {
		return p
	}
	return "." + string(filepath.Separator) + p
}

// resolve joins a relative path to dir.
func resolve(dir, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(dir, p)
}

func (d *decoder) model(n *yaml.Node, field, dir string) Model {
	const want = `a model such as "openai:gpt-4o-mini", "anthropic:claude-sonnet-4-5" or "scripted:script.yaml"`
	v := d.Str(n, field)
	provider, name, ok := strings.Cut(v, ":")
	switch {
	case !ok || name == "":
		d.Errorf(n, field, "must be %s", want)
	case provider == ProviderScripted:
		return Model{Provider: provider, Name: resolve(dir, name)}
	case provider == ProviderOpenAI || provider == ProviderAnthropic || provider == ProviderGemini || provider == ProviderBedrock:
		if !modelID.MatchString(name) {
			d.Errorf(n, field, "model id %q must not contain spaces", name)
		}
		return Model{Provider: provider, Name: name}
	default:
		d.Errorf(n, field, "unknown provider %q (want scripted, openai, anthropic, gemini or bedrock)", provider)
	}
	return Model{}
}

func (d *decoder) embeddings(n *yaml.Node, field, dir string) Embeddings {
	var e Embeddings
	d.Object(n, field, func(key string, v *yaml.Node, f string) bool {
		switch key {
		case "kinds":
			seen := map[steptype.Kind]bool{}
			d.List(v, f, func(_ int, v *yaml.Node, f string) {
				s := d.Str(v, f)
				k, err := steptype.ParseKind(s)
				switch {
				case err != nil:
					d.Errorf(v, f, "unknown step kind %q (want one of %v)", s, steptype.Kinds)
				case seen[k]:
					d.Errorf(v, f, "duplicate kind %q", s)
				default:
					seen[k] = true
					e.Kinds = append(e.Kinds, k)
				}
			})
		case "embedder":
			e.Embedder = d.Str(v, f)
		case "reranker":
			r := &Reranker{}
			d.Object(v, f, func(key string, v *yaml.Node, f string) bool {
				switch key {
				case "model":
					r.Model = d.model(v, f, dir)
				case "drop_unlisted":
					r.DropUnlisted = d.Boolean(v, f)
				default:
					return false
				}
				return true
			})
			if m := d.Resolve(v); m != nil && m.Kind == yaml.MappingNode && !hasKey(m, "model") {
				d.Errorf(m, yamlnode.Join(f, "model"), "required: the model that reranks")
			}
			e.Reranker = r
		default:
			return false
		}
		return true
	})
	return e
}
