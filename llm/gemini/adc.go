package gemini

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Application Default Credentials, as Google's libraries find them, for
// Vertex AI's OAuth access tokens.

// TokenFunc returns an OAuth 2.0 access token; it is called before every
// Vertex AI request, so it may refresh expiring tokens.
type TokenFunc func(ctx context.Context) (string, error)

// ErrNoGoogleCredentials is the cause of a Vertex AI call made without
// any credentials.
var ErrNoGoogleCredentials = errors.New("stepwise: gemini: no Google credentials (set GOOGLE_APPLICATION_CREDENTIALS, run gcloud auth application-default login, or run on Google Cloud)")

// cloudPlatformScope is the OAuth scope of Vertex AI.
const cloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform"

// defaultTokenURI is Google's OAuth 2.0 token endpoint.
const defaultTokenURI = "https://oauth2.googleapis.com/token"

// DefaultTokenSource returns a token from the Application Default
// Credentials:
//
//  1. the file GOOGLE_APPLICATION_CREDENTIALS names, else gcloud's
//     application_default_credentials.json (written by "gcloud auth
//     application-default login"): a service account key (a JWT signed
//     with its private key is exchanged for a token) or an authorized
//     user (its refresh token is);
//  2. the metadata server of Compute Engine, GKE, Cloud Run and Cloud
//     Functions (GCE_METADATA_HOST overrides its address).
//
// Tokens are kept until five minutes before they expire. Workload
// identity federation files (type external_account) are not read; pass a
// TokenFunc built on golang.org/x/oauth2/google for those.
func DefaultTokenSource(ctx context.Context) (string, error) {
	path := os.Getenv("GOOGLE_APPLICATION_CREDENTIALS")
	if path == "" {
		if p := gcloudADC(); p != "" {
			if _, err := os.Stat(p); err == nil {
				path = p
			}
		}
	}
	if path != "" {
		return fileToken(ctx, path)
	}
	host := os.Getenv("GCE_METADATA_HOST")
	if host == "" {
		host = "metadata.google.internal"
	}
	tok, err := cachedToken(ctx, "metadata "+host, func(ctx context.Context) (token, error) { return metadataToken(ctx, host) })
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		var dns *net.DNSError
		var op *net.OpError
		if errors.As(err, &dns) || errors.As(err, &op) {
			return "", ErrNoGoogleCredentials // not on Google Cloud
		}
		return "", err
	}
	return tok, nil
}

// gcloudADC is where gcloud writes the application default credentials.
func gcloudADC() string {
	dir := os.Getenv("CLOUDSDK_CONFIG")
	if dir == "" {
		if runtime.GOOS == "windows" {
			dir = filepath.Join(os.Getenv("APPDATA"), "gcloud")
		} else if home, err := os.UserHomeDir(); err == nil {
			dir = filepath.Join(home, ".config", "gcloud")
		}
	}
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, "application_default_credentials.json")
}

// credentialsFile is a service account key or an authorized user.
type credentialsFile struct {
	Type         string `json:"type"`
	ClientEmail  string `json:"client_email"`
	PrivateKeyID string `json:"private_key_id"`
	PrivateKey   string `json:"private_key"`
	TokenURI     string `json:"token_uri"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
	RefreshToken string `json:"refresh_token"`
}

// fileToken returns a token for the credentials file at path.
func fileToken(ctx context.Context, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("stepwise: gemini: credentials: %w", err)
	}
	var f credentialsFile
	if err := json.Unmarshal(b, &f); err != nil {
		return "", fmt.Errorf("stepwise: gemini: credentials %s: %w", path, err)
	}
	if f.TokenURI == "" {
		f.TokenURI = defaultTokenURI
	}
	switch f.Type {
	case "service_account":
		key, err := parseKey(f.PrivateKey)
		if err != nil {
			return "", fmt.Errorf("stepwise: gemini: credentials %s: %w", path, err)
		}
		return cachedToken(ctx, "service account "+f.ClientEmail+" "+f.TokenURI, func(ctx context.Context) (token, error) {
			assertion, err := signJWT(key, f.PrivateKeyID, f.ClientEmail, f.TokenURI, time.Now())
			if err != nil {
				return token{}, err
			}
			return exchange(ctx, f.TokenURI, url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {assertion}})
		})
	case "authorized_user":
		if f.RefreshToken == "" {
			return "", fmt.Errorf("stepwise: gemini: credentials %s: no refresh_token", path)
		}
		return cachedToken(ctx, "user "+f.ClientID+" "+f.TokenURI, func(ctx context.Context) (token, error) {
			return exchange(ctx, f.TokenURI, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {f.RefreshToken},
				"client_id": {f.ClientID}, "client_secret": {f.ClientSecret}})
		})
	}
	return "", fmt.Errorf("stepwise: gemini: credentials %s: type %q is not read here (service_account and authorized_user are); pass Config.TokenSource", path, f.Type)
}

// parseKey reads a service account's PEM private key (PKCS #8, or PKCS #1).
func parseKey(p string) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode([]byte(p))
	if block == nil {
		return nil, errors.New("private_key is not PEM")
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, errors.New("private_key is not an RSA key")
		}
		return rk, nil
	}
	return x509.ParsePKCS1PrivateKey(block.Bytes)
}

// signJWT returns the RS256 assertion of a service account asking aud for
// a cloud-platform token, valid for an hour from now.
func signJWT(key *rsa.PrivateKey, keyID, email, aud string, now time.Time) (string, error) {
	enc := base64.RawURLEncoding
	header, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": keyID})
	claims, _ := json.Marshal(map[string]any{"iss": email, "scope": cloudPlatformScope, "aud": aud,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	signed := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(nil, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("stepwise: gemini: sign JWT: %w", err)
	}
	return signed + "." + enc.EncodeToString(sig), nil
}

// token is an access token and its expiry.
type token struct {
	value   string
	expires time.Time
}

// tokenResponse is the answer of a token endpoint or the metadata server.
type tokenResponse struct {
	AccessToken      string `json:"access_token"`
	ExpiresIn        int64  `json:"expires_in"`
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
}

// authClient sends the token requests.
var authClient = &http.Client{Timeout: 30 * time.Second}

// exchange posts form to a token endpoint.
func exchange(ctx context.Context, uri string, form url.Values) (token, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, uri, strings.NewReader(form.Encode()))
	if err != nil {
		return token{}, fmt.Errorf("stepwise: gemini: token: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return doToken(req, authClient)
}

// metadataClient reaches the metadata server: short timeouts, so that a
// machine off Google Cloud fails fast, and no proxy.
var metadataClient = &http.Client{
	Timeout:   3 * time.Second,
	Transport: &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: time.Second}).DialContext},
}

// metadataToken asks the metadata server for the default service
// account's token.
func metadataToken(ctx context.Context, host string) (token, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/computeMetadata/v1/instance/service-accounts/default/token?scopes="+url.QueryEscape(cloudPlatformScope), nil)
	if err != nil {
		return token{}, err
	}
	req.Header.Set("Metadata-Flavor", "Google")
	return doToken(req, metadataClient)
}

func doToken(req *http.Request, c *http.Client) (token, error) {
	resp, err := c.Do(req)
	if err != nil {
		return token{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return token{}, err
	}
	var tr tokenResponse
	_ = json.Unmarshal(b, &tr)
	if resp.StatusCode != http.StatusOK || tr.AccessToken == "" {
		msg := tr.Error
		if tr.ErrorDescription != "" {
			msg += ": " + tr.ErrorDescription
		}
		if msg == "" {
			msg = strings.TrimSpace(string(b))
		}
		return token{}, fmt.Errorf("stepwise: gemini: token from %s: %s %s", req.URL.Host, resp.Status, msg)
	}
	t := token{value: tr.AccessToken}
	if tr.ExpiresIn > 0 {
		t.expires = time.Now().Add(time.Duration(tr.ExpiresIn) * time.Second)
	}
	return t, nil
}

// refreshBefore is how long before its expiry a token is renewed.
const refreshBefore = 5 * time.Minute

var tokenCache struct {
	sync.Mutex
	m map[string]token
}

// cachedToken returns the token of source, fetching one when there is
// none or it is about to expire.
func cachedToken(ctx context.Context, source string, fetch func(context.Context) (token, error)) (string, error) {
	tokenCache.Lock()
	t, ok := tokenCache.m[source]
	tokenCache.Unlock()
	if ok && (t.expires.IsZero() || time.Until(t.expires) > refreshBefore) {
		return t.value, nil
	}
	t, err := fetch(ctx)
	if err != nil {
		return "", err
	}
	tokenCache.Lock()
	if tokenCache.m == nil {
		tokenCache.m = map[string]token{}
	}
	tokenCache.m[source] = t
	tokenCache.Unlock()
	return t.value, nil
}
