package agentfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/internal/agentfile"
)

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.*")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(filepath.Base(file), data)
	}
	f.Add("a.yaml", []byte("name: a\nmodel: openai:x\nmetadata: {a: &x [1, *x]}\n"))
	f.Add("a.json", []byte(`{"name": "a", "model": "scripted:s.yaml", "tools": [{"files": {"root": "."}}]}`))
	f.Add("a.yaml", []byte("name: a\nmodel: openai:x\nprices: {m: {input: 1e3}}\napprovals: {'*': never}\n"))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		s, err := agentfile.Parse(name, data)
		if err != nil {
			var pe *agentfile.ParseError
			if s != nil || !errors.As(err, &pe) || !strings.HasPrefix(err.Error(), name) {
				t.Fatalf("bad failure: spec %v, error %T %v", s, err, err)
			}
			return
		}
		if s.Name == "" || s.Model.Provider == "" || s.Model.Name == "" {
			t.Fatalf("accepted a spec without name or model: %+v", s)
		}
		for _, tool := range s.Tools {
			if tool.Name == agentfile.ToolFiles && tool.Root == "" || tool.Name == agentfile.ToolHTTPGet && len(tool.AllowHosts) == 0 {
				t.Fatalf("accepted an unconfigured %s tool", tool.Name)
			}
		}
		for _, m := range s.MCPServers {
			if (m.Command == "") == (m.URL == "") {
				t.Fatalf("accepted MCP server %+v", m)
			}
		}
	})
}
