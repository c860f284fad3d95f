package bedrock

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Roles assumed with AWS STS: AssumeRole, signed with the source
// credentials, and AssumeRoleWithWebIdentity, authenticated by the token.

// stsClient sends the STS requests.
var stsClient = &http.Client{Timeout: 30 * time.Second}

// assumeProfileRole assumes the role_arn of profile name (its keys kv)
// with the credentials of its source.
func assumeProfileRole(ctx context.Context, name string, kv map[string]string, depth int) (Credentials, error) {
	if depth >= maxRoleChain {
		return Credentials{}, fmt.Errorf("stepwise: bedrock: profile %s: source_profile chain longer than %d", name, maxRoleChain)
	}
	if kv["mfa_serial"] != "" {
		return Credentials{}, fmt.Errorf("stepwise: bedrock: profile %s needs an MFA code, which cannot be asked for here", name)
	}
	region := kv["region"]
	if region == "" {
		region = DefaultRegion()
	}
	role, session := kv["role_arn"], kv["role_session_name"]
	if tokenFile := kv["web_identity_token_file"]; tokenFile != "" {
		return webIdentity(ctx, region, tokenFile, role, session)
	}
	var src Credentials
	var err error
	switch source := kv["source_profile"]; {
	case source == name:
		// A profile may hold the keys that assume its own role.
		if kv["aws_access_key_id"] == "" || kv["aws_secret_access_key"] == "" {
			return Credentials{}, fmt.Errorf("stepwise: bedrock: profile %s is its own source_profile but has no keys", name)
		}
		src = Credentials{AccessKeyID: kv["aws_access_key_id"], SecretAccessKey: kv["aws_secret_access_key"], SessionToken: kv["aws_session_token"]}
	case source != "":
		var ok bool
		src, ok, err = profileCredentials(ctx, source, depth+1)
		if err == nil && !ok {
			err = fmt.Errorf("stepwise: bedrock: profile %s: source_profile %s has no credentials", name, source)
		}
	default:
		src, err = credentialSource(ctx, name, kv["credential_source"])
	}
	if err != nil {
		return Credentials{}, err
	}
	form := url.Values{"Action": {"AssumeRole"}, "Version": {"2011-06-15"}, "RoleArn": {role}, "RoleSessionName": {sessionName(session)}}
	if v := kv["external_id"]; v != "" {
		form.Set("ExternalId", v)
	}
	if v := kv["duration_seconds"]; v != "" {
		if _, err := strconv.Atoi(v); err != nil {
			return Credentials{}, fmt.Errorf("stepwise: bedrock: profile %s: duration_seconds %q is not a number", name, v)
		}
		form.Set("DurationSeconds", v)
	}
	return cached(ctx, "role "+role+" from "+src.AccessKeyID+" at "+stsEndpoint(region), func(ctx context.Context) (remoteCredentials, error) {
		return stsCall(ctx, region, form, &src)
	})
}

// credentialSource returns the credentials a credential_source names.
func credentialSource(ctx context.Context, profile, source string) (Credentials, error) {
	switch source {
	case "Environment":
		if c, ok := envCredentials(); ok {
			return c, nil
		}
		return Credentials{}, fmt.Errorf("stepwise: bedrock: profile %s: credential_source Environment, but AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set", profile)
	case "EcsContainer":
		if u := containerURI(); u != "" {
			return cached(ctx, "container "+u, func(ctx context.Context) (remoteCredentials, error) { return containerCredentials(ctx, u) })
		}
		return Credentials{}, fmt.Errorf("stepwise: bedrock: profile %s: credential_source EcsContainer outside a container", profile)
	case "Ec2InstanceMetadata":
		return instanceCredentials(ctx)
	case "":
		return Credentials{}, fmt.Errorf("stepwise: bedrock: profile %s has a role_arn but no source_profile, credential_source or web_identity_token_file", profile)
	}
	return Credentials{}, fmt.Errorf("stepwise: bedrock: profile %s: unknown credential_source %q", profile, source)
}

// webIdentity exchanges the token in tokenFile for the role's credentials.
// The token is read again for each exchange, since it rotates.
func webIdentity(ctx context.Context, region, tokenFile, role, session string) (Credentials, error) {
	return cached(ctx, "web identity "+role+" "+tokenFile+" at "+stsEndpoint(region), func(ctx context.Context) (remoteCredentials, error) {
		token, err := os.ReadFile(tokenFile)
		if err != nil {
			return remoteCredentials{}, fmt.Errorf("stepwise: bedrock: web identity token: %w", err)
		}
		form := url.Values{"Action": {"AssumeRoleWithWebIdentity"}, "Version": {"2011-06-15"}, "RoleArn": {role},
			"RoleSessionName": {sessionName(session)}, "WebIdentityToken": {strings.TrimSpace(string(token))}}
		return stsCall(ctx, region, form, nil)
	})
}

// sessionName returns name, or a default one naming this package.
func sessionName(name string) string {
	if name != "" {
		return name
	}
	return "stepwise-" + strconv.FormatInt(time.Now().Unix(), 10)
}

// stsEndpoint returns $AWS_ENDPOINT_URL_STS, else the regional endpoint
// (us-east-1 without a region).
func stsEndpoint(region string) string {
	if e := os.Getenv("AWS_ENDPOINT_URL_STS"); e != "" {
		return strings.TrimSuffix(e, "/")
	}
	if region == "" {
		region = "us-east-1"
	}
	return "https://sts." + region + ".amazonaws.com"
}

// stsResult is the credentials element of an AssumeRole or
// AssumeRoleWithWebIdentity response, or the error of an ErrorResponse.
type stsResult struct {
	Credentials *struct {
		AccessKeyID     string `xml:"AccessKeyId"`
		SecretAccessKey string `xml:"SecretAccessKey"`
		SessionToken    string `xml:"SessionToken"`
		Expiration      string `xml:"Expiration"`
	} `xml:"Credentials"`
}

// stsCall posts form to STS, signed with src when it is not nil, and
// returns the credentials of the response.
func stsCall(ctx context.Context, region string, form url.Values, src *Credentials) (remoteCredentials, error) {
	if region == "" {
		region = "us-east-1"
	}
	body := []byte(form.Encode())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, stsEndpoint(region)+"/", bytes.NewReader(body))
	if err != nil {
		return remoteCredentials{}, fmt.Errorf("stepwise: bedrock: sts: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	if src != nil {
		sign(req, body, *src, region, "sts", time.Now())
	}
	resp, err := stsClient.Do(req)
	if err != nil {
		return remoteCredentials{}, fmt.Errorf("stepwise: bedrock: sts %s: %w", form.Get("Action"), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return remoteCredentials{}, fmt.Errorf("stepwise: bedrock: sts %s: %w", form.Get("Action"), err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Code    string `xml:"Code"`
				Message string `xml:"Message"`
			} `xml:"Error"`
		}
		_ = xml.Unmarshal(b, &e)
		return remoteCredentials{}, fmt.Errorf("stepwise: bedrock: sts %s: %s %s: %s", form.Get("Action"), resp.Status, e.Error.Code, e.Error.Message)
	}
	// <AssumeRoleResponse><AssumeRoleResult><Credentials>…, or the
	// same under AssumeRoleWithWebIdentity….
	var r struct {
		Role        stsResult `xml:"AssumeRoleResult"`
		WebIdentity stsResult `xml:"AssumeRoleWithWebIdentityResult"`
	}
	err = xml.Unmarshal(b, &r)
	c := r.Role.Credentials
	if c == nil {
		c = r.WebIdentity.Credentials
	}
	if err != nil || c == nil {
		return remoteCredentials{}, fmt.Errorf("stepwise: bedrock: sts %s: no credentials in the response (%v)", form.Get("Action"), err)
	}
	out := remoteCredentials{Credentials: Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken}}
	if c.Expiration != "" {
		if out.expires, err = time.Parse(time.RFC3339, c.Expiration); err != nil {
			return remoteCredentials{}, fmt.Errorf("stepwise: bedrock: sts %s: expiration %q: %w", form.Get("Action"), c.Expiration, err)
		}
	}
	return out, nil
}
