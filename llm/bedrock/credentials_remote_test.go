package bedrock_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/llm/bedrock"
)

func TestCredentialProcess(t *testing.T) {
	dir := awsEnv(t)
	runs := filepath.Join(dir, "runs")
	script := func(name, output string) string {
		p := filepath.Join(dir, name)
		write(t, p, "#!/bin/sh\necho run >> '"+runs+"'\ncat <<'EOF'\n"+output+"\nEOF\n")
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	soon := time.Now().Add(time.Minute).UTC().Format(time.RFC3339)
	lasting := script("lasting", `{"Version": 1, "AccessKeyId": "AKIDPROC", "SecretAccessKey": "proc-secret", "SessionToken": "proc-token", "Expiration": "`+later+`"}`)
	expiring := script("expiring", `{"Version": 1, "AccessKeyId": "AKIDSOON", "SecretAccessKey": "s", "Expiration": "`+soon+`"}`)
	v2 := script("v2", `{"Version": 2, "AccessKeyId": "A", "SecretAccessKey": "s"}`)
	failing := filepath.Join(dir, "failing")
	write(t, failing, "#!/bin/sh\necho 'token expired, run aws sso login' >&2\nexit 3\n")
	if err := os.Chmod(failing, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "config"), "[profile lasting]\ncredential_process = "+lasting+" --profile x\n"+
		"[profile expiring]\ncredential_process = "+expiring+"\n[profile v2]\ncredential_process = "+v2+"\n[profile failing]\ncredential_process = "+failing+"\n")
	count := func() int {
		b, _ := os.ReadFile(runs)
		return strings.Count(string(b), "run")
	}

	t.Setenv("AWS_PROFILE", "lasting")
	for range 2 {
		c, err := bedrock.DefaultCredentials(t.Context())
		if err != nil || c != (bedrock.Credentials{AccessKeyID: "AKIDPROC", SecretAccessKey: "proc-secret", SessionToken: "proc-token"}) {
			t.Fatalf("%+v %v", c, err)
		}
	}
	if n := count(); n != 1 {
		t.Errorf("the process ran %d times for credentials valid for an hour", n)
	}
	t.Setenv("AWS_PROFILE", "expiring")
	for range 2 {
		if c, err := bedrock.DefaultCredentials(t.Context()); err != nil || c.AccessKeyID != "AKIDSOON" {
			t.Fatalf("%+v %v", c, err)
		}
	}
	if n := count(); n != 3 {
		t.Errorf("the process ran %d times in all, want 3: credentials within 5 minutes of expiry are renewed", n)
	}
	t.Setenv("AWS_PROFILE", "v2")
	if _, err := bedrock.DefaultCredentials(t.Context()); err == nil || !strings.Contains(err.Error(), "Version 2") {
		t.Errorf("version 2: %v", err)
	}
	t.Setenv("AWS_PROFILE", "failing")
	if _, err := bedrock.DefaultCredentials(t.Context()); err == nil || !strings.Contains(err.Error(), "run aws sso login") {
		t.Errorf("failing process: %v", err)
	}
}

func TestContainerCredentials(t *testing.T) {
	dir := awsEnv(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/credentials" || r.Header.Get("Authorization") != "pod-identity-token" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"AccessKeyId": "AKIDPOD", "SecretAccessKey": "pod-secret", "Token": "pod-session", "Expiration": "` + time.Now().Add(6*time.Hour).UTC().Format(time.RFC3339) + `"}`))
	}))
	defer srv.Close()
	tokenFile := filepath.Join(dir, "token")
	write(t, tokenFile, "pod-identity-token\n")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", srv.URL+"/v1/credentials")
	t.Setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", tokenFile)
	c, err := bedrock.DefaultCredentials(t.Context())
	if err != nil || c != (bedrock.Credentials{AccessKeyID: "AKIDPOD", SecretAccessKey: "pod-secret", SessionToken: "pod-session"}) {
		t.Fatalf("%+v %v", c, err)
	}
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://credentials.example.com/v1/credentials")
	if _, err := bedrock.DefaultCredentials(t.Context()); err == nil || !strings.Contains(err.Error(), "must be https or a loopback") {
		t.Errorf("plain http to a remote host: %v", err)
	}
}

func TestInstanceMetadataCredentials(t *testing.T) {
	awsEnv(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token" && r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds") != "":
			_, _ = w.Write([]byte("imds-token"))
		case r.Header.Get("X-Aws-Ec2-Metadata-Token") != "imds-token":
			w.WriteHeader(http.StatusUnauthorized)
		case r.URL.Path == "/latest/meta-data/iam/security-credentials/":
			_, _ = w.Write([]byte("bedrock-role\n"))
		case r.URL.Path == "/latest/meta-data/iam/security-credentials/bedrock-role":
			_, _ = w.Write([]byte(`{"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": "AKIDEC2", "SecretAccessKey": "ec2-secret", "Token": "ec2-session", "Expiration": "` + time.Now().Add(6*time.Hour).UTC().Format(time.RFC3339) + `"}`))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	t.Setenv("AWS_EC2_METADATA_DISABLED", "")
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", srv.URL)
	c, err := bedrock.DefaultCredentials(t.Context())
	if err != nil || c != (bedrock.Credentials{AccessKeyID: "AKIDEC2", SecretAccessKey: "ec2-secret", SessionToken: "ec2-session"}) {
		t.Fatalf("%+v %v", c, err)
	}

	// No metadata service: the chain ends without credentials.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + l.Addr().String()
	_ = l.Close()
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", gone)
	if _, err := bedrock.DefaultCredentials(t.Context()); !errors.Is(err, bedrock.ErrNoCredentials) {
		t.Errorf("without a metadata service: %v", err)
	}
}
