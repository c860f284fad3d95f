package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Card is the part of an agent card the client uses.
type Card struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Version     string `json:"version"`
	// v1.0
	SupportedInterfaces []Interface `json:"supportedInterfaces"`
	// v0.3
	URL                  string      `json:"url"`
	ProtocolVersion      string      `json:"protocolVersion"`
	PreferredTransport   string      `json:"preferredTransport"`
	AdditionalInterfaces []Interface `json:"additionalInterfaces"`
	Capabilities         struct {
		Streaming bool `json:"streaming"`
	} `json:"capabilities"`
}

// Interface is a transport of an agent card: v1.0's supportedInterfaces
// entry or v0.3's additionalInterfaces entry.
type Interface struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"` // v1.0
	ProtocolVersion string `json:"protocolVersion"` // v1.0
	Transport       string `json:"transport"`       // v0.3
}

// cardURL is where the card of the agent at u is: u itself when its path
// ends in .json, else u/.well-known/agent-card.json.
func cardURL(u string) string {
	if p, err := url.Parse(u); err == nil && strings.HasSuffix(p.Path, ".json") {
		return u
	}
	return strings.TrimSuffix(u, "/") + "/.well-known/agent-card.json"
}

// fetchCard reads the card at u.
func fetchCard(ctx context.Context, hc *http.Client, name, u string, headers map[string]string) (*Card, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("agent card %s: %s", u, fmt.Sprintf(format, args...))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fail("%v", err)
	}
	req.Header.Set("Accept", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is named already
		}
		return nil, fail("%v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e := (&client{name: name}).statusError("card", resp).(*Error)
		return nil, fail("HTTP %d: %s", resp.StatusCode, e.Message)
	}
	var card Card
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&card); err != nil {
		return nil, fail("not an agent card (JSON): %v", err)
	}
	if card.Name == "" {
		return nil, fail("not an agent card: it has no name")
	}
	return &card, nil
}

// endpoint picks the card's JSON-RPC interface: its URL (resolved against
// the card's) and whether it speaks v0.3.
func (card *Card) endpoint(base string) (string, bool, error) {
	resolve := func(s string) (string, error) {
		b, err := url.Parse(base)
		if err != nil {
			return "", err
		}
		r, err := b.Parse(s)
		if err != nil {
			return "", err
		}
		if r.Scheme != "http" && r.Scheme != "https" {
			return "", fmt.Errorf("interface URL %q is not http or https", s)
		}
		return r.String(), nil
	}
	for _, i := range card.SupportedInterfaces {
		if strings.EqualFold(i.ProtocolBinding, "JSONRPC") && i.URL != "" {
			u, err := resolve(i.URL)
			return u, strings.HasPrefix(i.ProtocolVersion, "0."), err
		}
	}
	if card.URL != "" && (card.PreferredTransport == "" || strings.EqualFold(card.PreferredTransport, "JSONRPC")) {
		u, err := resolve(card.URL)
		return u, true, err
	}
	for _, i := range card.AdditionalInterfaces {
		if strings.EqualFold(i.Transport, "JSONRPC") && i.URL != "" {
			u, err := resolve(i.URL)
			return u, true, err
		}
	}
	return "", false, errors.New("the card offers no JSON-RPC interface (supportedInterfaces with protocolBinding JSONRPC)")
}
