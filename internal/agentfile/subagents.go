package agentfile

import (
	"github.com/stepwise-run/stepwise/internal/yamlnode"

	"gopkg.in/yaml.v3"
)

// subAgents reads sub_agents: each entry is a path to an agent file or a
// mapping naming a remote A2A agent.
func (d *decoder) subAgents(n *yaml.Node, field, dir string) (paths []string, remote []A2AAgent) {
	const want = "a path to an agent file or a mapping with a2a: the URL of a remote agent"
	names := map[string]bool{}
	d.List(n, field, func(_ int, v *yaml.Node, f string) {
		r := d.Resolve(v)
		if r == nil {
			return
		}
		if r.Kind != yaml.MappingNode {
			s := d.Scalar(v, f, want)
			if s == nil {
				return
			}
			if s.ShortTag() != "!!str" || s.Value == "" {
				d.Errorf(s, f, "must be a path")
				return
			}
			paths = append(paths, resolve(dir, s.Value))
			return
		}
		var a A2AAgent
		d.Object(v, f, func(key string, v *yaml.Node, f string) bool {
			switch key {
			case "a2a":
				if a.URL = d.Str(v, f); !httpURL(a.URL) {
					d.Errorf(v, f, "must be an http or https URL (the agent's card or its JSON-RPC endpoint)")
				}
			case "name":
				switch a.Name = d.Str(v, f); {
				case !validName(a.Name):
					d.Errorf(v, f, "must be 1–64 characters of a-z, 0-9, _ and -")
				case names[a.Name]:
					d.Errorf(v, f, "duplicate sub-agent name %q", a.Name)
				}
				names[a.Name] = true
			case "description":
				a.Description = d.Str(v, f)
			case "headers":
				a.Headers = d.stringMap(v, f, "an HTTP header name", headerName.MatchString)
			case "token_env":
				if a.TokenEnv = d.Str(v, f); !envName.MatchString(a.TokenEnv) {
					d.Errorf(v, f, "must be an environment variable name such as RESEARCHER_TOKEN")
				}
			default:
				return false
			}
			return true
		})
		if !hasKey(r, "a2a") {
			d.Errorf(r, yamlnode.Join(f, "a2a"), "required: the URL of the remote agent's card or JSON-RPC endpoint")
		}
		remote = append(remote, a)
	})
	return paths, remote
}
