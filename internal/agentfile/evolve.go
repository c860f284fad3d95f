package agentfile

import "gopkg.in/yaml.v3"

// Reducer names accepted in the reducers section.
var ReducerNames = []string{"replace", "append", "merge", "sum"}

// Update modes: what a run started on an older version of the agent does
// when a changed definition is loaded (on_update).
const (
	UpdateContinue = "continue" // go on with the new definition
	UpdateRestart  = "restart"  // restart from the start step in a fork
	UpdateFail     = "fail"     // fail the run with the reason
)

// reducers reads the reducers section: state key → reducer name.
func (d *decoder) reducers(n *yaml.Node, field string) map[string]string {
	var out map[string]string
	d.Object(n, field, func(key string, v *yaml.Node, f string) bool {
		name := d.Str(v, f)
		ok := false
		for _, r := range ReducerNames {
			ok = ok || r == name
		}
		if !ok {
			d.Errorf(v, f, "must be one of replace, append, merge, sum")
			return true
		}
		if key == "" {
			d.Errorf(v, f, "key must be a state key")
			return true
		}
		if out == nil {
			out = map[string]string{}
		}
		out[key] = name
		return true
	})
	return out
}

// onUpdate reads on_update.
func (d *decoder) onUpdate(n *yaml.Node, field string) string {
	switch m := d.Str(n, field); m {
	case UpdateContinue, UpdateRestart, UpdateFail:
		return m
	default:
		d.Errorf(n, field, "must be continue, restart or fail")
		return ""
	}
}

// stepMap reads step_map: old step name → step name in this version.
func (d *decoder) stepMap(n *yaml.Node, field string) map[string]string {
	var out map[string]string
	d.Object(n, field, func(key string, v *yaml.Node, f string) bool {
		to := d.Str(v, f)
		if !stepName.MatchString(key) {
			d.Errorf(v, f, "key must be a step name of letters, digits, _ . : and -")
			return true
		}
		if !stepName.MatchString(to) {
			d.Errorf(v, f, "must be a step name of letters, digits, _ . : and -")
			return true
		}
		if out == nil {
			out = map[string]string{}
		}
		out[key] = to
		return true
	})
	return out
}
