package bedrock_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stepwise-run/stepwise/llm/bedrock"
	"github.com/stepwise-run/stepwise/llm/llmtest"
)

// awsEnv clears the variables of the chain and points the shared files
// into a temporary directory, returning it.
func awsEnv(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
		"AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME", "AWS_ENDPOINT_URL_STS"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("HOME", dir)
	return dir
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultCredentialsChain(t *testing.T) {
	dir := awsEnv(t)
	ctx := t.Context()
	if _, err := bedrock.DefaultCredentials(ctx); !errors.Is(err, bedrock.ErrNoCredentials) {
		t.Fatalf("empty chain: %v", err)
	}

	write(t, filepath.Join(dir, "config"), `# shared config
[default]
region = eu-west-1

[profile work]
region=ap-southeast-2
aws_access_key_id = AKIDCONFIG
aws_secret_access_key = config-secret
s3 =
  max_concurrent_requests = 20
`)
	write(t, filepath.Join(dir, "credentials"), `[default]
aws_access_key_id = AKIDDEFAULT
aws_secret_access_key = default/secret+key
aws_session_token = default-token

[ci]
aws_access_key_id=AKIDCI
aws_secret_access_key=ci-secret
`)
	for _, tc := range []struct {
		profile, id, token, region string
	}{
		{"", "AKIDDEFAULT", "default-token", "eu-west-1"},
		{"ci", "AKIDCI", "", ""},
		{"work", "AKIDCONFIG", "", "ap-southeast-2"}, // keys in the config file
	} {
		t.Setenv("AWS_PROFILE", tc.profile)
		c, err := bedrock.DefaultCredentials(ctx)
		if err != nil || c.AccessKeyID != tc.id || c.SessionToken != tc.token || c.SecretAccessKey == "" {
			t.Errorf("profile %q: %+v %v", tc.profile, c, err)
		}
		if r := bedrock.DefaultRegion(); r != tc.region {
			t.Errorf("profile %q: region %q, want %q", tc.profile, r, tc.region)
		}
	}
	t.Setenv("AWS_PROFILE", "")
	if c, _ := bedrock.DefaultCredentials(ctx); c.SecretAccessKey != "default/secret+key" {
		t.Errorf("secret %q", c.SecretAccessKey)
	}

	// The environment comes first, for keys and region.
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
	t.Setenv("AWS_SESSION_TOKEN", "env-token")
	t.Setenv("AWS_DEFAULT_REGION", "us-east-2")
	if c, err := bedrock.DefaultCredentials(ctx); err != nil || c != (bedrock.Credentials{AccessKeyID: "AKIDENV", SecretAccessKey: "env-secret", SessionToken: "env-token"}) {
		t.Errorf("environment: %+v %v", c, err)
	}
	if r := bedrock.DefaultRegion(); r != "us-east-2" {
		t.Errorf("region %q", r)
	}
	t.Setenv("AWS_REGION", "us-west-1")
	if r := bedrock.DefaultRegion(); r != "us-west-1" {
		t.Errorf("AWS_REGION: region %q", r)
	}
}

func TestDefaultCredentialsUnreadable(t *testing.T) {
	dir := awsEnv(t)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", dir) // a directory
	if _, err := bedrock.DefaultCredentials(t.Context()); err == nil || errors.Is(err, bedrock.ErrNoCredentials) {
		t.Errorf("error %v, want the read error", err)
	}
}

// TestModelSignsWithTheChain calls a local server with credentials from a
// profile file, as an unconfigured Model does.
func TestModelSignsWithTheChain(t *testing.T) {
	dir := awsEnv(t)
	write(t, filepath.Join(dir, "credentials"), "[default]\naws_access_key_id = AKIDTEST\naws_secret_access_key = s\n")
	write(t, filepath.Join(dir, "config"), "[default]\nregion = us-west-2\n")
	f := newFake(t, serveEvents(eventFile(t, "text.events")))
	t.Setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", f.URL)
	m, err := bedrock.New(bedrock.Config{Model: "amazon.nova-micro-v1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if d := llmtest.Drain(t.Context(), m, llmtest.UserRequest("hi")); d.Err != nil {
		t.Fatal(d.Err)
	}
	if r := f.last(t); r.header.Get("X-Amz-Security-Token") != "" {
		t.Errorf("token sent: %v", r.header)
	}
}
