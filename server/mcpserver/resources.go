package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/stepwise-run/stepwise/render"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
)

// The URIs of a session's resources.
const (
	sessionPrefix = "stepwise://sessions/"
	traceSuffix   = "/trace"
)

func (h *handlers) addResources(srv *sdk.Server) {
	srv.AddResourceTemplate(&sdk.ResourceTemplate{
		Name:        "session",
		Title:       "Session",
		URITemplate: sessionPrefix + "{id}",
		Description: "A session and its first 1000 steps, as JSON: {\"session\": …, \"steps\": […]}.",
		MIMEType:    "application/json",
	}, h.readSession)
	srv.AddResourceTemplate(&sdk.ResourceTemplate{
		Name:        "session_trace",
		Title:       "Session trace",
		URITemplate: sessionPrefix + "{id}" + traceSuffix,
		Description: "The plain-text trace of a session's first 1000 steps.",
		MIMEType:    "text/plain",
	}, h.readSession)
}

// readSession serves both templates: the URI's suffix picks the form. An
// unknown session is the protocol's resource-not-found error.
func (h *handlers) readSession(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	id, trace := strings.TrimPrefix(uri, sessionPrefix), false
	if rest, ok := strings.CutSuffix(id, traceSuffix); ok {
		id, trace = rest, true
	}
	if id == "" || strings.Contains(id, "/") || !strings.HasPrefix(uri, sessionPrefix) {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	sess, err := h.eng.Store().SessionGet(ctx, &store.SessionGetParams{ID: id})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, sdk.ResourceNotFoundError(uri)
		}
		return nil, err
	}
	var steps []*stepwise.Step
	if sess.LastSequence > 0 {
		steps, err = h.eng.Store().StepList(ctx, &store.StepListParams{SessionID: id, StartSeq: 1, EndSeq: min(sess.LastSequence, maxSteps)})
		if err != nil {
			return nil, err
		}
	}
	if trace {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: render.Steps(steps)}}}, nil
	}
	if steps == nil {
		steps = []*stepwise.Step{}
	}
	b, err := json.Marshal(map[string]any{"session": sess, "steps": steps})
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}
