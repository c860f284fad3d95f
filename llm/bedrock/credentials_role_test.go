package bedrock_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/llm/bedrock"
)

// fakeSTS answers AssumeRole (which must be signed by a known key) and
// AssumeRoleWithWebIdentity (which must carry the token) with credentials
// named after the role, and records each call as "Action RoleArn by AKID".
type fakeSTS struct {
	*httptest.Server
	mu    sync.Mutex
	calls []string
}

var stsAuth = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=(\w+)/\d{8}/([a-z0-9-]+)/sts/aws4_request, SignedHeaders=content-type;host;x-amz-date(;x-amz-security-token)?, Signature=[0-9a-f]{64}$`)

func newFakeSTS(t *testing.T) *fakeSTS {
	f := &fakeSTS{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(b))
		action, role := form.Get("Action"), form.Get("RoleArn")
		by := "token " + form.Get("WebIdentityToken")
		if action == "AssumeRole" {
			m := stsAuth.FindStringSubmatch(r.Header.Get("Authorization"))
			if m == nil {
				w.WriteHeader(http.StatusForbidden)
				_, _ = io.WriteString(w, `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>InvalidClientTokenId</Code><Message>The security token included in the request is invalid.</Message></Error></ErrorResponse>`)
				return
			}
			by = m[1] + " in " + m[2]
			if e := form.Get("ExternalId"); e != "" {
				by += " external " + e
			}
		}
		f.mu.Lock()
		f.calls = append(f.calls, action+" "+role+" by "+by)
		f.mu.Unlock()
		key := "AKID" + strings.ToUpper(role[strings.LastIndexByte(role, '/')+1:])
		_, _ = fmt.Fprintf(w, `<%[1]sResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <%[1]sResult>
    <Credentials>
      <AccessKeyId>%[2]s</AccessKeyId>
      <SecretAccessKey>secret-%[2]s</SecretAccessKey>
      <SessionToken>token-%[2]s</SessionToken>
      <Expiration>%[3]s</Expiration>
    </Credentials>
    <AssumedRoleUser><Arn>%[4]s/session</Arn><AssumedRoleId>AROA:session</AssumedRoleId></AssumedRoleUser>
  </%[1]sResult>
  <ResponseMetadata><RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId></ResponseMetadata>
</%[1]sResponse>`, action, key, time.Now().Add(time.Hour).UTC().Format(time.RFC3339), role)
	}))
	t.Cleanup(f.Close)
	t.Setenv("AWS_ENDPOINT_URL_STS", f.URL)
	return f
}

func (f *fakeSTS) log() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.calls, "\n")
}

func TestAssumeRoleProfiles(t *testing.T) {
	dir := awsEnv(t)
	sts := newFakeSTS(t)
	write(t, filepath.Join(dir, "credentials"), "[base]\naws_access_key_id = AKIDBASE\naws_secret_access_key = base-secret\n")
	write(t, filepath.Join(dir, "config"), `[profile admin]
role_arn = arn:aws:iam::123456789012:role/admin
source_profile = base
external_id = ext-1
region = eu-north-1

[profile chained]
role_arn = arn:aws:iam::123456789012:role/chained
source_profile = admin

[profile fromenv]
role_arn = arn:aws:iam::123456789012:role/fromenv
credential_source = Environment

[profile loop]
role_arn = arn:aws:iam::123456789012:role/loop
source_profile = loop2

[profile loop2]
role_arn = arn:aws:iam::123456789012:role/loop2
source_profile = loop

[profile mfa]
role_arn = arn:aws:iam::123456789012:role/mfa
source_profile = base
mfa_serial = arn:aws:iam::123456789012:mfa/me

[profile nosource]
role_arn = arn:aws:iam::123456789012:role/nosource

[profile sso]
sso_session = corp
sso_account_id = 123456789012
sso_role_name = Dev
`)
	ctx := t.Context()
	t.Setenv("AWS_PROFILE", "admin")
	for range 2 { // the second call is served from the cache
		c, err := bedrock.DefaultCredentials(ctx)
		if err != nil || c != (bedrock.Credentials{AccessKeyID: "AKIDADMIN", SecretAccessKey: "secret-AKIDADMIN", SessionToken: "token-AKIDADMIN"}) {
			t.Fatalf("admin: %+v %v", c, err)
		}
	}
	t.Setenv("AWS_PROFILE", "chained")
	if c, err := bedrock.DefaultCredentials(ctx); err != nil || c.AccessKeyID != "AKIDCHAINED" {
		t.Fatalf("chained: %+v %v", c, err)
	}
	want := "AssumeRole arn:aws:iam::123456789012:role/admin by AKIDBASE in eu-north-1 external ext-1\n" +
		"AssumeRole arn:aws:iam::123456789012:role/chained by AKIDADMIN in us-east-1"
	if got := sts.log(); got != want {
		t.Errorf("STS calls:\n%s\nwant\n%s", got, want)
	}

	t.Setenv("AWS_PROFILE", "fromenv")
	if _, err := bedrock.DefaultCredentials(ctx); err == nil || !strings.Contains(err.Error(), "credential_source Environment") {
		t.Errorf("fromenv without keys: %v", err)
	}
	for profile, want := range map[string]string{
		"loop":     "chain longer than",
		"mfa":      "MFA",
		"nosource": "no source_profile",
		"sso":      "aws configure export-credentials --profile sso",
	} {
		t.Setenv("AWS_PROFILE", profile)
		if _, err := bedrock.DefaultCredentials(ctx); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to mention %q", profile, err, want)
		}
	}
}

func TestAssumeRoleRefused(t *testing.T) {
	dir := awsEnv(t)
	newFakeSTS(t)
	// Keys that sign, but that fakeSTS's pattern refuses (not \w+).
	write(t, filepath.Join(dir, "credentials"), "[bad]\naws_access_key_id = AKID-BAD\naws_secret_access_key = s\n")
	write(t, filepath.Join(dir, "config"), "[profile r]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = bad\n")
	t.Setenv("AWS_PROFILE", "r")
	if _, err := bedrock.DefaultCredentials(t.Context()); err == nil || !strings.Contains(err.Error(), "InvalidClientTokenId") {
		t.Errorf("error %v", err)
	}
}

func TestWebIdentity(t *testing.T) {
	dir := awsEnv(t)
	sts := newFakeSTS(t)
	token := filepath.Join(dir, "token")
	write(t, token, "eyJhbGciOiJSUzI1NiJ9.pod\n")
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", token)
	t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/irsa")
	c, err := bedrock.DefaultCredentials(t.Context())
	if err != nil || c != (bedrock.Credentials{AccessKeyID: "AKIDIRSA", SecretAccessKey: "secret-AKIDIRSA", SessionToken: "token-AKIDIRSA"}) {
		t.Fatalf("%+v %v", c, err)
	}
	if got := sts.log(); got != "AssumeRoleWithWebIdentity arn:aws:iam::123456789012:role/irsa by token eyJhbGciOiJSUzI1NiJ9.pod" {
		t.Errorf("STS calls %s", got)
	}
}
