package mcp

import (
	"errors"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestServerError(t *testing.T) {
	t.Parallel()
	answer := &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "bad x"}
	rejected := &jsonrpc.Error{Code: codeRejected, Message: "rejected by transport"}
	for _, tc := range []struct {
		name string
		err  error
		want *jsonrpc.Error
	}{
		{"answer", fmt.Errorf("calling %q: %w", "tools/call", answer), answer},
		// An HTTP error status whose body is a JSON-RPC error: the SDK wraps both.
		{"answer in HTTP error", fmt.Errorf("calling: %w", fmt.Errorf("POST: %w: %w: Bad Request", answer, rejected)), answer},
		{"rejected only (HTTP 503, refused connection)", fmt.Errorf("calling: %w", fmt.Errorf("%w: POST: Service Unavailable", rejected)), nil},
		{"connection closed", fmt.Errorf("%w: calling: client is closing", sdk.ErrConnectionClosed), nil},
		{"plain", errors.New("EOF"), nil},
		{"nil", nil, nil},
	} {
		if got := serverError(tc.err); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestToolName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ prefix, name, want string }{
		{"", "get-sum", "get-sum"},
		{"gh_", "repos.list/all", "gh_repos_list_all"},
		{"", "día", "d__a"},
		{"p_", string(make([]byte, 80)), "p_" + string(bytesOf('_', 62))},
	} {
		if got := toolName(tc.prefix, tc.name); got != tc.want {
			t.Errorf("toolName(%q, %q) = %q, want %q", tc.prefix, tc.name, got, tc.want)
		}
	}
}

func bytesOf(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}
