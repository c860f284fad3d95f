package bedrock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Credentials are AWS access keys.
type Credentials struct {
	// AccessKeyID and SecretAccessKey sign the requests. Required.
	AccessKeyID, SecretAccessKey string
	// SessionToken is the token of temporary credentials (STS), sent as
	// X-Amz-Security-Token. Default: none.
	SessionToken string
}

// CredentialsFunc returns the credentials of one call; it is called before
// every request, so it may refresh expiring credentials (for instance
// from the AWS SDK's credential providers).
type CredentialsFunc func(ctx context.Context) (Credentials, error)

// ErrNoCredentials is the cause of a call made without any credentials.
var ErrNoCredentials = errors.New("stepwise: bedrock: no AWS credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile in ~/.aws/credentials)")

// DefaultCredentials reads the standard chain on every call:
//
//  1. AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN;
//  2. the profile AWS_PROFILE (default "default") of the shared
//     credentials file (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials)
//     and the shared config file (AWS_CONFIG_FILE or ~/.aws/config, where
//     it is "[profile NAME]"): a role_arn assumed with STS from its
//     source_profile, credential_source or web_identity_token_file; else
//     its keys; else the output of its credential_process;
//  3. a web identity (AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN, as
//     EKS sets them) exchanged with STS for the role's credentials;
//  4. the container endpoint of ECS and EKS Pod Identity
//     (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI, with
//     AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE));
//  5. the EC2 instance metadata service (IMDSv2), unless
//     AWS_EC2_METADATA_DISABLED is "true".
//
// Credentials that expire are kept until five minutes before they do.
// STS is https://sts.REGION.amazonaws.com (AWS_ENDPOINT_URL_STS
// overrides it). Profiles that use SSO directly are not resolved: give
// them a credential_process ("aws configure export-credentials --profile
// NAME --format process"), or pass a CredentialsFunc built on the AWS SDK.
func DefaultCredentials(ctx context.Context) (Credentials, error) {
	if c, ok := envCredentials(); ok {
		return c, nil
	}
	c, ok, err := profileCredentials(ctx, profileName(), 0)
	if ok || err != nil {
		return c, err
	}
	if tokenFile, role := os.Getenv("AWS_WEB_IDENTITY_TOKEN_FILE"), os.Getenv("AWS_ROLE_ARN"); tokenFile != "" && role != "" {
		return webIdentity(ctx, DefaultRegion(), tokenFile, role, os.Getenv("AWS_ROLE_SESSION_NAME"))
	}
	if u := containerURI(); u != "" {
		return cached(ctx, "container "+u, func(ctx context.Context) (remoteCredentials, error) { return containerCredentials(ctx, u) })
	}
	if !strings.EqualFold(os.Getenv("AWS_EC2_METADATA_DISABLED"), "true") {
		c, err := instanceCredentials(ctx)
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return Credentials{}, ctx.Err()
		}
		// Not on EC2, or no role: nothing more to try.
	}
	return Credentials{}, ErrNoCredentials
}

// envCredentials returns the keys of the environment, if both are set.
func envCredentials() (Credentials, bool) {
	id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	return Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: os.Getenv("AWS_SESSION_TOKEN")}, id != "" && secret != ""
}

// containerURI returns the container credentials endpoint, "" if none.
func containerURI() string {
	if rel := os.Getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"); rel != "" {
		return "http://169.254.170.2" + rel
	}
	return os.Getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI")
}

// instanceCredentials returns the credentials of the EC2 instance's role.
func instanceCredentials(ctx context.Context) (Credentials, error) {
	base := os.Getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT")
	if base == "" {
		base = "http://169.254.169.254"
	}
	return cached(ctx, "imds "+base, func(ctx context.Context) (remoteCredentials, error) { return imdsCredentials(ctx, base) })
}

// maxRoleChain bounds the source_profile links followed from one profile.
const maxRoleChain = 5

// profileCredentials resolves the named profile; ok is false when it
// names no credentials at all.
func profileCredentials(ctx context.Context, name string, depth int) (c Credentials, ok bool, err error) {
	kv, err := profileKeys(name)
	if err != nil {
		return Credentials{}, false, err
	}
	if role := kv["role_arn"]; role != "" {
		c, err := assumeProfileRole(ctx, name, kv, depth)
		return c, err == nil, err
	}
	if kv["aws_access_key_id"] != "" && kv["aws_secret_access_key"] != "" {
		return Credentials{AccessKeyID: kv["aws_access_key_id"], SecretAccessKey: kv["aws_secret_access_key"], SessionToken: kv["aws_session_token"]}, true, nil
	}
	if cmd := kv["credential_process"]; cmd != "" {
		c, err := cached(ctx, "process "+cmd, func(ctx context.Context) (remoteCredentials, error) { return processCredentials(ctx, cmd) })
		return c, err == nil, err
	}
	if kv["sso_session"] != "" || kv["sso_start_url"] != "" {
		return Credentials{}, false, fmt.Errorf("stepwise: bedrock: profile %s uses SSO, which is not resolved here: add credential_process = aws configure export-credentials --profile %s --format process", name, name)
	}
	return Credentials{}, false, nil
}

// profileKeys merges a profile's section of the config file with its
// section of the credentials file, which wins.
func profileKeys(name string) (map[string]string, error) {
	cfg, err := readProfile(sharedFile("AWS_CONFIG_FILE", "config"), configSection(name))
	if err != nil {
		return nil, err
	}
	creds, err := readProfile(sharedFile("AWS_SHARED_CREDENTIALS_FILE", "credentials"), name)
	if err != nil {
		return nil, err
	}
	kv := map[string]string{}
	for k, v := range cfg {
		kv[k] = v
	}
	for k, v := range creds {
		kv[k] = v
	}
	return kv, nil
}

// DefaultRegion returns AWS_REGION, else AWS_DEFAULT_REGION, else the
// region of the profile in the shared config file, else "".
func DefaultRegion() string {
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION"} {
		if v := strings.TrimSpace(os.Getenv(k)); v != "" {
			return v
		}
	}
	kv, _ := readProfile(sharedFile("AWS_CONFIG_FILE", "config"), configSection(profileName()))
	return kv["region"]
}

func profileName() string {
	if p := strings.TrimSpace(os.Getenv("AWS_PROFILE")); p != "" {
		return p
	}
	return "default"
}

// configSection is the section of a profile in the config file, where
// every profile but the default one is "[profile NAME]".
func configSection(profile string) string {
	if profile == "default" {
		return profile
	}
	return "profile " + profile
}

// sharedFile returns $env, else ~/.aws/name, else "".
func sharedFile(env, name string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".aws", name)
}

// readProfile returns the keys of one section of an INI-style AWS file,
// lower-cased, nil when the file does not exist or has no such section.
// Nested values (indented lines under "s3 =") are skipped.
func readProfile(path, section string) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stepwise: bedrock: %w", err)
	}
	defer f.Close()
	var kv map[string]string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		raw := sc.Text()
		line := strings.TrimSpace(raw)
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
			continue
		case line[0] == '[':
			name := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(line, "["), "]"))
			in = strings.Join(strings.Fields(name), " ") == section
			if in && kv == nil {
				kv = map[string]string{}
			}
			continue
		}
		if !in || raw[0] == ' ' || raw[0] == '\t' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok {
			kv[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("stepwise: bedrock: read %s: %w", path, err)
	}
	return kv, nil
}
