package bedrock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Credentials that expire: those of a credential process, the container
// endpoint and the instance metadata service.

// remoteCredentials are credentials with their expiry, zero for none.
type remoteCredentials struct {
	Credentials
	expires time.Time
}

// refreshBefore is how long before their expiry credentials are renewed.
const refreshBefore = 5 * time.Minute

var credCache struct {
	sync.Mutex
	m map[string]remoteCredentials
}

// cached returns the credentials of source, fetching them when they are
// missing or about to expire. Concurrent callers of one source may fetch
// twice; the last answer is kept.
func cached(ctx context.Context, source string, fetch func(context.Context) (remoteCredentials, error)) (Credentials, error) {
	credCache.Lock()
	c, ok := credCache.m[source]
	credCache.Unlock()
	if ok && (c.expires.IsZero() || time.Until(c.expires) > refreshBefore) {
		return c.Credentials, nil
	}
	c, err := fetch(ctx)
	if err != nil {
		return Credentials{}, err
	}
	if c.AccessKeyID == "" || c.SecretAccessKey == "" {
		return Credentials{}, fmt.Errorf("stepwise: bedrock: %s returned no keys", source)
	}
	credCache.Lock()
	if credCache.m == nil {
		credCache.m = map[string]remoteCredentials{}
	}
	credCache.m[source] = c
	credCache.Unlock()
	return c.Credentials, nil
}

// credentialDoc is the JSON of a credential process (Version 1) and of
// the container and metadata endpoints (Token instead of SessionToken).
type credentialDoc struct {
	Version         int    `json:"Version"`
	Code            string `json:"Code"`
	AccessKeyID     string `json:"AccessKeyId"`
	SecretAccessKey string `json:"SecretAccessKey"`
	SessionToken    string `json:"SessionToken"`
	Token           string `json:"Token"`
	Expiration      string `json:"Expiration"`
}

func (d *credentialDoc) credentials() (remoteCredentials, error) {
	c := remoteCredentials{Credentials: Credentials{AccessKeyID: d.AccessKeyID, SecretAccessKey: d.SecretAccessKey, SessionToken: d.SessionToken}}
	if c.SessionToken == "" {
		c.SessionToken = d.Token
	}
	if d.Expiration != "" {
		t, err := time.Parse(time.RFC3339, d.Expiration)
		if err != nil {
			return remoteCredentials{}, fmt.Errorf("expiration %q: %w", d.Expiration, err)
		}
		c.expires = t
	}
	return c, nil
}

// processTimeout bounds a credential process.
const processTimeout = time.Minute

// processCredentials runs a profile's credential_process with the shell,
// as the AWS SDKs do, and reads its JSON output.
func processCredentials(ctx context.Context, command string) (remoteCredentials, error) {
	ctx, cancel := context.WithTimeout(ctx, processTimeout)
	defer cancel()
	var cmd *exec.Cmd
	if runtime.GOOS == "windows" {
		cmd = exec.CommandContext(ctx, "cmd.exe", "/C", command)
	} else {
		cmd = exec.CommandContext(ctx, "sh", "-c", command)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return remoteCredentials{}, fmt.Errorf("stepwise: bedrock: credential_process: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var d credentialDoc
	if err := json.Unmarshal(out, &d); err != nil {
		return remoteCredentials{}, fmt.Errorf("stepwise: bedrock: credential_process output: %w", err)
	}
	if d.Version != 1 {
		return remoteCredentials{}, fmt.Errorf("stepwise: bedrock: credential_process output has Version %d, want 1", d.Version)
	}
	c, err := d.credentials()
	if err != nil {
		return remoteCredentials{}, fmt.Errorf("stepwise: bedrock: credential_process output: %w", err)
	}
	return c, nil
}

// metadataClient reaches the link-local endpoints: short timeouts, so that
// a machine without them fails fast, and no proxy.
var metadataClient = &http.Client{
	Timeout:   2 * time.Second,
	Transport: &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: time.Second}).DialContext},
}

// containerCredentials reads the endpoint of ECS or EKS Pod Identity. A
// full URI must use https or a loopback or container host.
func containerCredentials(ctx context.Context, u string) (remoteCredentials, error) {
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "https" && !(pu.Scheme == "http" && containerHost(pu.Hostname()))) {
		return remoteCredentials{}, fmt.Errorf("stepwise: bedrock: container credentials URI %q must be https or a loopback or container address", u)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return remoteCredentials{}, err
	}
	token := os.Getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN")
	if f := os.Getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return remoteCredentials{}, fmt.Errorf("stepwise: bedrock: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	var d credentialDoc
	if err := getJSON(req, &d); err != nil {
		return remoteCredentials{}, fmt.Errorf("stepwise: bedrock: container credentials: %w", err)
	}
	return d.credentials()
}

// containerHost reports whether plain http may reach host: loopback, or
// the ECS and EKS credential addresses.
func containerHost(host string) bool {
	switch host {
	case "localhost", "169.254.170.2", "169.254.170.23", "fd00:ec2::23":
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// imdsCredentials asks the instance metadata service (IMDSv2: a session
// token first) for the credentials of the instance's role.
func imdsCredentials(ctx context.Context, base string) (remoteCredentials, error) {
	base = strings.TrimSuffix(base, "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/latest/api/token", nil)
	if err != nil {
		return remoteCredentials{}, err
	}
	req.Header.Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "21600")
	token, err := getText(req)
	if err != nil {
		return remoteCredentials{}, err
	}
	const path = "/latest/meta-data/iam/security-credentials/"
	get := func(p string) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodGet, base+p, nil)
		if err == nil {
			r.Header.Set("X-Aws-Ec2-Metadata-Token", token)
		}
		return r, err
	}
	req, err = get(path)
	if err != nil {
		return remoteCredentials{}, err
	}
	roles, err := getText(req)
	if err != nil {
		return remoteCredentials{}, err
	}
	role, _, _ := strings.Cut(strings.TrimSpace(roles), "\n")
	if role == "" {
		return remoteCredentials{}, errors.New("the instance has no role")
	}
	if req, err = get(path + url.PathEscape(role)); err != nil {
		return remoteCredentials{}, err
	}
	var d credentialDoc
	if err := getJSON(req, &d); err != nil {
		return remoteCredentials{}, err
	}
	if d.Code != "" && d.Code != "Success" {
		return remoteCredentials{}, fmt.Errorf("instance credentials: %s", d.Code)
	}
	return d.credentials()
}

func getText(req *http.Request) (string, error) {
	resp, err := metadataClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s %s: %s", req.Method, req.URL.Path, resp.Status)
	}
	return string(b), nil
}

func getJSON(req *http.Request, v any) error {
	s, err := getText(req)
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(s), v)
}
