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
//     credentials file, AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials,
//     then of the shared config file, AWS_CONFIG_FILE or ~/.aws/config
//     ("[profile NAME]", or "[default]"): its keys, or the output of its
//     credential_process;
//  3. the container endpoint of ECS and EKS Pod Identity
//     (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI, with
//     AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE));
//  4. the EC2 instance metadata service (IMDSv2), unless
//     AWS_EC2_METADATA_DISABLED is "true".
//
// Credentials of the last three sources are kept until five minutes
// before they expire. Profiles that assume a role or use SSO directly are
// not resolved: give them a credential_process (for SSO,
// "aws configure export-credentials --profile NAME --format process"), or
// pass a CredentialsFunc built on the AWS SDK.
func DefaultCredentials(ctx context.Context) (Credentials, error) {
	if id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"); id != "" && secret != "" {
		return Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: os.Getenv("AWS_SESSION_TOKEN")}, nil
	}
	profile := profileName()
	for _, f := range []struct {
		path    string
		section string
	}{
		{sharedFile("AWS_SHARED_CREDENTIALS_FILE", "credentials"), profile},
		{sharedFile("AWS_CONFIG_FILE", "config"), configSection(profile)},
	} {
		kv, err := readProfile(f.path, f.section)
		if err != nil {
			return Credentials{}, err
		}
		if kv["aws_access_key_id"] != "" && kv["aws_secret_access_key"] != "" {
			return Credentials{AccessKeyID: kv["aws_access_key_id"], SecretAccessKey: kv["aws_secret_access_key"], SessionToken: kv["aws_session_token"]}, nil
		}
		if cmd := kv["credential_process"]; cmd != "" {
			return cached(ctx, "process "+cmd, func(ctx context.Context) (remoteCredentials, error) { return processCredentials(ctx, cmd) })
		}
	}
	if rel, full := os.Getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"), os.Getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI"); rel != "" || full != "" {
		u := full
		if rel != "" {
			u = "http://169.254.170.2" + rel
		}
		return cached(ctx, "container "+u, func(ctx context.Context) (remoteCredentials, error) { return containerCredentials(ctx, u) })
	}
	if !strings.EqualFold(os.Getenv("AWS_EC2_METADATA_DISABLED"), "true") {
		base := os.Getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT")
		if base == "" {
			base = "http://169.254.169.254"
		}
		c, err := cached(ctx, "imds "+base, func(ctx context.Context) (remoteCredentials, error) { return imdsCredentials(ctx, base) })
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
