package main_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMCPScreenshotAttached: an MCP tool answering an image (started as
// "./mcpimage" beside an agent file given by a relative path) gets the
// image stored as an attachment of its tool step, the step flagged, and the
// image served by the API with its type.
func TestMCPScreenshotAttached(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "mcpimage"), "./testdata/mcpimage").CombinedOutput(); err != nil {
		t.Fatalf("build the MCP server: %v\n%s", err, out)
	}
	for name, body := range map[string]string{
		"agent.yaml":  "name: browser\nmodel: scripted:script.yaml\nmcp_servers:\n  - {name: web, command: ./mcpimage}\n",
		"script.yaml": "turns:\n  - tool_calls: [{name: screenshot, arguments: {}}]\n  - text: I looked at the page.\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// --agent agent.yaml, relative, run from the file's directory.
	out, errOut, code := stepwise(t, dir, "--db", "sqlite:s.db", "run", "--agent", "agent.yaml", "--input", "Look at the page.")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	session := runLine.FindStringSubmatch(out)[1]
	out, _, _ = stepwise(t, dir, "--db", "sqlite:s.db", "steps", session, "--json")
	var toolStep struct {
		ID       string         `json:"id"`
		Content  string         `json:"content"`
		Metadata map[string]any `json:"metadata"`
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(line, `"kind":"tool"`) {
			if err := json.Unmarshal([]byte(line), &toolStep); err != nil {
				t.Fatal(err)
			}
		}
	}
	if toolStep.Metadata["screenshots"] != float64(1) || !strings.Contains(toolStep.Content, "[image image/png") {
		t.Fatalf("tool step: %+v", toolStep)
	}

	if out, _, _ := stepwise(t, dir, "--db", "sqlite:s.db", "steps", session); !strings.Contains(out, "[1 image attachment(s)]") {
		t.Errorf("stepwise steps does not flag the screenshot:\n%s", out)
	}
	url := launchServe(t, dir, nil, "--db", "sqlite:s.db")
	var list struct {
		Attachments []struct {
			ID          string `json:"id"`
			Kind        string `json:"kind"`
			ContentType string `json:"content_type"`
		} `json:"attachments"`
	}
	getJSON(t, url+"/v1/steps/"+toolStep.ID+"/attachments", &list)
	if len(list.Attachments) != 1 || list.Attachments[0].ContentType != "image/png" || list.Attachments[0].Kind != "image" {
		t.Fatalf("attachments: %+v", list)
	}
	resp, err := http.Get(url + "/v1/attachments/" + list.Attachments[0].ID + "/content")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" || !bytes.HasPrefix(data, []byte("\x89PNG")) {
		t.Fatalf("content: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), data)
	}
}
