package gemini_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stepwise-run/stepwise/llm/gemini"
	"github.com/stepwise-run/stepwise/llm/llmtest"
	"github.com/stepwise-run/stepwise/steptype"
)

// googleEnv clears the variables that choose Google credentials and
// endpoints, and points gcloud's configuration into a temporary directory,
// which it returns.
func googleEnv(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, k := range []string{"GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_APPLICATION_CREDENTIALS",
		"GOOGLE_API_KEY", "GEMINI_API_KEY", "GEMINI_BASE_URL"} {
		t.Setenv(k, "")
	}
	t.Setenv("CLOUDSDK_CONFIG", dir)
	closed(t) // no metadata server unless a test starts one
	return dir
}

// closed points GCE_METADATA_HOST at a port nothing listens on.
func closed(t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GCE_METADATA_HOST", l.Addr().String())
	_ = l.Close()
}

const vertexPath = "/v1/projects/my-proj/locations/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent"

func TestVertexProject(t *testing.T) {
	googleEnv(t)
	s := llmtest.NewServer(t, vertexPath, llmtest.SSEFile(t, "text.sse"))
	m, err := gemini.New(gemini.Config{Model: "gemini-2.5-flash", Vertex: true, Project: "my-proj", Location: "us-central1", BaseURL: s.URL, APIKey: "ignored",
		TokenSource: func(context.Context) (string, error) { return "ya29.token", nil }})
	if err != nil {
		t.Fatal(err)
	}
	if d := llmtest.Drain(t.Context(), m, llmtest.UserRequest("hi")); d.Err != nil || d.Final.Content != "Hello, world!" {
		t.Fatalf("%+v", d)
	}
	if h := s.Last(t).Header; h.Get("Authorization") != "Bearer ya29.token" || h.Get("x-goog-api-key") != "" {
		t.Errorf("headers %v", h)
	}
}

func TestVertexExpressMode(t *testing.T) {
	googleEnv(t)
	t.Setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
	t.Setenv("GOOGLE_API_KEY", "AQ.express")
	s := llmtest.NewServer(t, "/v1/publishers/google/models/gemini-2.5-flash:streamGenerateContent", llmtest.SSEFile(t, "text.sse"))
	m, err := gemini.New(gemini.Config{Model: "gemini-2.5-flash", BaseURL: s.URL})
	if err != nil {
		t.Fatal(err)
	}
	if d := llmtest.Drain(t.Context(), m, llmtest.UserRequest("hi")); d.Err != nil {
		t.Fatal(d.Err)
	}
	if h := s.Last(t).Header; h.Get("x-goog-api-key") != "AQ.express" || h.Get("Authorization") != "" {
		t.Errorf("headers %v", h)
	}
}

func TestVertexConfigInvalid(t *testing.T) {
	googleEnv(t)
	for name, cfg := range map[string]gemini.Config{
		"no project, no key": {Model: "m", Vertex: true},
		"bad location":       {Model: "m", Vertex: true, Project: "p", Location: "us-central1/../x"},
		"bad project":        {Model: "m", Vertex: true, Project: "My Project"},
	} {
		if _, err := gemini.New(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// tokenServer is a token endpoint that checks each request with check and
// answers a token; it counts the requests.
func tokenServer(t *testing.T, check func(r *http.Request, form url.Values) error) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		b, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(b))
		if err := check(r, form); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"invalid_grant","error_description":"`+err.Error()+`"}`)
			return
		}
		_, _ = io.WriteString(w, `{"access_token":"ya29.issued","expires_in":3599,"token_type":"Bearer"}`)
	}))
	t.Cleanup(s.Close)
	return s, &n
}

// verifyJWT checks an RS256 assertion against pub and returns its claims.
func verifyJWT(assertion string, pub *rsa.PublicKey) (map[string]any, error) {
	parts := strings.Split(assertion, ".")
	if len(parts) != 3 {
		return nil, errors.New("not a JWT")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
		return nil, err
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	return claims, json.Unmarshal(b, &claims)
}

func TestVertexServiceAccount(t *testing.T) {
	dir := googleEnv(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	tokens, calls := tokenServer(t, func(r *http.Request, form url.Values) error {
		if form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
			return errors.New("grant_type " + form.Get("grant_type"))
		}
		claims, err := verifyJWT(form.Get("assertion"), &key.PublicKey)
		if err != nil {
			return err
		}
		if claims["iss"] != "agent@my-proj.iam.gserviceaccount.com" || claims["scope"] != "https://www.googleapis.com/auth/cloud-platform" || !strings.HasSuffix(claims["aud"].(string), "/token") {
			return errors.New("claims")
		}
		return nil
	})
	sa, _ := json.Marshal(map[string]string{"type": "service_account", "project_id": "my-proj", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "agent@my-proj.iam.gserviceaccount.com", "token_uri": tokens.URL + "/token"})
	path := filepath.Join(dir, "sa.json")
	if err := os.WriteFile(path, sa, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
	t.Setenv("GOOGLE_GENAI_USE_VERTEXAI", "1")
	t.Setenv("GOOGLE_CLOUD_PROJECT", "my-proj")
	t.Setenv("GOOGLE_CLOUD_LOCATION", "us-central1")
	s := llmtest.NewServer(t, vertexPath, llmtest.SSEFile(t, "text.sse"))
	m, err := gemini.New(gemini.Config{Model: "gemini-2.5-flash", BaseURL: s.URL})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if d := llmtest.Drain(t.Context(), m, llmtest.UserRequest("hi")); d.Err != nil {
			t.Fatal(d.Err)
		}
		if h := s.Last(t).Header.Get("Authorization"); h != "Bearer ya29.issued" {
			t.Errorf("Authorization %q", h)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d token requests for two calls within the token's hour", n)
	}
}

func TestAuthorizedUserAndMetadataTokens(t *testing.T) {
	dir := googleEnv(t)
	tokens, _ := tokenServer(t, func(r *http.Request, form url.Values) error {
		if form.Get("grant_type") != "refresh_token" || form.Get("refresh_token") != "1//refresh" || form.Get("client_id") != "cid.apps.googleusercontent.com" {
			return errors.New("form " + form.Encode())
		}
		return nil
	})
	// gcloud's well-known file, as "gcloud auth application-default login" writes it.
	user, _ := json.Marshal(map[string]string{"type": "authorized_user", "client_id": "cid.apps.googleusercontent.com",
		"client_secret": "secret", "refresh_token": "1//refresh", "token_uri": tokens.URL})
	if err := os.WriteFile(filepath.Join(dir, "application_default_credentials.json"), user, 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, err := gemini.DefaultTokenSource(t.Context()); err != nil || tok != "ya29.issued" {
		t.Fatalf("authorized user: %q %v", tok, err)
	}

	// Without a file: the metadata server.
	t.Setenv("CLOUDSDK_CONFIG", t.TempDir())
	md := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Metadata-Flavor") != "Google" || r.URL.Path != "/computeMetadata/v1/instance/service-accounts/default/token" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		_, _ = io.WriteString(w, `{"access_token":"ya29.metadata","expires_in":3000,"token_type":"Bearer"}`)
	}))
	defer md.Close()
	t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(md.URL, "http://"))
	if tok, err := gemini.DefaultTokenSource(t.Context()); err != nil || tok != "ya29.metadata" {
		t.Fatalf("metadata: %q %v", tok, err)
	}

	// Neither: no credentials, and a call is refused before it is sent.
	closed(t)
	if _, err := gemini.DefaultTokenSource(t.Context()); !errors.Is(err, gemini.ErrNoGoogleCredentials) {
		t.Fatalf("none: %v", err)
	}
	s := llmtest.NewServer(t, "", llmtest.SSEFile(t, "text.sse"))
	m, err := gemini.New(gemini.Config{Model: "gemini-2.5-flash", Vertex: true, Project: "my-proj", BaseURL: s.URL})
	if err != nil {
		t.Fatal(err)
	}
	d := llmtest.Drain(t.Context(), m, llmtest.UserRequest("hi"))
	if e := llmtest.AsError(t, d.Err); e.Class != steptype.ErrorPermanent || e.Code != "auth" || !errors.Is(d.Err, gemini.ErrNoGoogleCredentials) || s.Count() != 0 {
		t.Errorf("error %+v after %d requests", e, s.Count())
	}
}

func TestCredentialsFileUnsupported(t *testing.T) {
	dir := googleEnv(t)
	path := filepath.Join(dir, "wif.json")
	if err := os.WriteFile(path, []byte(`{"type":"external_account","audience":"//iam.googleapis.com/x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
	if _, err := gemini.DefaultTokenSource(t.Context()); err == nil || !strings.Contains(err.Error(), `type "external_account"`) {
		t.Errorf("error %v", err)
	}
}
