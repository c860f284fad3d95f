// Package agentfile reads declarative agent files (YAML or JSON) into a
// neutral Spec that the engine turns into an agent, for the CLI and the
// server.
//
// Parsing is strict: unknown fields, wrong types, bad durations, names and
// enum values are errors, each located by file, line and field:
//
//	agent.yaml:7: limits.max_steps: must be a positive integer
//
// Relative paths in the file are resolved against the file's directory.
// The format is documented in docs/agent_file.md.
//
//	spec, err := agentfile.Load("agents/support.yaml")
package agentfile
