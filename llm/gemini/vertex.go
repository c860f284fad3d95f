package gemini

import (
	"errors"
	"os"
	"regexp"
	"strings"
)

// vertexName is what a project id or a location may be.
var vertexName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// vertexRoot fills the Vertex AI defaults of cfg and returns the models
// collection URL:
//
//	https://LOCATION-aiplatform.googleapis.com/v1/projects/PROJECT/locations/LOCATION/publishers/google/models/
//
// (aiplatform.googleapis.com for the global location), or, without a
// project, the express-mode https://aiplatform.googleapis.com/v1/publishers/google/models/.
// Config.BaseURL replaces the scheme and host.
func vertexRoot(cfg *Config) (string, error) {
	if cfg.Project == "" {
		cfg.Project = strings.TrimSpace(os.Getenv("GOOGLE_CLOUD_PROJECT"))
	}
	if cfg.Location == "" {
		cfg.Location = strings.TrimSpace(os.Getenv("GOOGLE_CLOUD_LOCATION"))
	}
	if cfg.Location == "" {
		cfg.Location = "global"
	}
	if !vertexName.MatchString(cfg.Location) {
		return "", errors.New("stepwise: gemini: Config.Location must be a region such as us-central1 or global, got " + cfg.Location)
	}
	if cfg.Project == "" {
		if cfg.APIKey == "" {
			return "", errors.New("stepwise: gemini: Vertex AI needs Config.Project (GOOGLE_CLOUD_PROJECT), or an API key for express mode")
		}
		return vertexHost(cfg, "global") + "/v1/publishers/google/models/", nil
	}
	if !vertexName.MatchString(cfg.Project) {
		return "", errors.New("stepwise: gemini: Config.Project must be a project id, got " + cfg.Project)
	}
	if cfg.TokenSource == nil {
		cfg.TokenSource = DefaultTokenSource
	}
	return vertexHost(cfg, cfg.Location) + "/v1/projects/" + cfg.Project + "/locations/" + cfg.Location + "/publishers/google/models/", nil
}

// vertexHost is Config.BaseURL, else the endpoint of location.
func vertexHost(cfg *Config, location string) string {
	if cfg.BaseURL != "" {
		return strings.TrimSuffix(cfg.BaseURL, "/")
	}
	if location == "global" {
		return "https://aiplatform.googleapis.com"
	}
	return "https://" + location + "-aiplatform.googleapis.com"
}
