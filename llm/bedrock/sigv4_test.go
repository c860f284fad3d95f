package bedrock

import (
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The vectors of the Signature Version 4 documentation and its test suite:
// the example credentials, 2015-08-30 12:36:00 UTC, us-east-1.
var (
	exampleCreds = Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
	exampleTime  = time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)
)

func TestSigningKeyVector(t *testing.T) {
	t.Parallel()
	got := hex.EncodeToString(signingKey(exampleCreds.SecretAccessKey, "20150830", "us-east-1", "iam"))
	if want := "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9"; got != want {
		t.Errorf("signing key %s, want %s", got, want)
	}
}

func TestSignVectors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, method, url, service string
		header                     map[string]string
		canonicalHash              string // hex SHA-256 of the canonical request, "" to skip
		authorization              string
	}{
		{
			name: "get-vanilla", method: "GET", url: "https://example.amazonaws.com/", service: "service",
			authorization: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
		},
		{
			name: "post-vanilla", method: "POST", url: "https://example.amazonaws.com/", service: "service",
			authorization: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
		},
		{
			// The IAM ListUsers example of the signing documentation.
			name: "iam", method: "GET", url: "https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08", service: "iam",
			header:        map[string]string{"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
			canonicalHash: "f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59",
			authorization: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7",
		},
	} {
		r, err := http.NewRequest(tc.method, tc.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range tc.header {
			r.Header.Set(k, v)
		}
		sign(r, nil, exampleCreds, "us-east-1", tc.service, exampleTime)
		if got := r.Header.Get("Authorization"); got != tc.authorization {
			t.Errorf("%s: Authorization\n%s\nwant\n%s", tc.name, got, tc.authorization)
		}
		if r.Header.Get("X-Amz-Date") != "20150830T123600Z" {
			t.Errorf("%s: X-Amz-Date %q", tc.name, r.Header.Get("X-Amz-Date"))
		}
		if tc.canonicalHash != "" {
			r.Header.Del("Authorization")
			c, _ := canonicalRequest(r, nil)
			if got := hexSHA256([]byte(c)); got != tc.canonicalHash {
				t.Errorf("%s: canonical request hash %s, want %s; request:\n%s", tc.name, got, tc.canonicalHash, c)
			}
		}
	}
}

func TestSignSessionTokenAndPath(t *testing.T) {
	t.Parallel()
	r, err := http.NewRequest("POST", "https://bedrock-runtime.us-east-1.amazonaws.com/model/"+uriEncode("anthropic.claude-3-haiku-20240307-v1:0")+"/converse", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("User-Agent", "changed-by-proxies")
	c := exampleCreds
	c.SessionToken = "FQoGZXIvYXdzE//token"
	sign(r, []byte("{}"), c, "us-east-1", "bedrock", exampleTime)
	if r.Header.Get("X-Amz-Security-Token") != c.SessionToken {
		t.Errorf("token header %q", r.Header.Get("X-Amz-Security-Token"))
	}
	canonical, signed := canonicalRequest(r, []byte("{}"))
	lines := strings.Split(canonical, "\n")
	// The path as sent has the colon escaped once; the canonical URI
	// escapes it again.
	if r.URL.EscapedPath() != "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse" || lines[1] != "/model/anthropic.claude-3-haiku-20240307-v1%253A0/converse" {
		t.Errorf("path %s, canonical URI %s", r.URL.EscapedPath(), lines[1])
	}
	if signed != "content-type;host;x-amz-date;x-amz-security-token" {
		t.Errorf("signed headers %s", signed)
	}
	if lines[len(lines)-1] != "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a" {
		t.Errorf("payload hash %s", lines[len(lines)-1])
	}
}

func TestCanonicalQuery(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"":                       "",
		"b=2&a=1":                "a=1&b=2",
		"a=2&a=1":                "a=1&a=2",
		"a-b=1&a=2":              "a=2&a-b=1",
		"k=a%20b&x=%7E&y=+&flag": "flag=&k=a%20b&x=~&y=%2B",
	} {
		if got := canonicalQuery(raw); got != want {
			t.Errorf("canonicalQuery(%q) = %q, want %q", raw, got, want)
		}
	}
}
