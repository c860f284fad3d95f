package bedrock

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"sort"
	"strings"
	"time"
)

// Signature Version 4, as the AWS General Reference describes it: a
// canonical request, a string to sign naming the credential scope, and an
// HMAC-SHA256 chain from the secret key through date, region and service.

const (
	sigAlgorithm = "AWS4-HMAC-SHA256"
	amzDate      = "20060102T150405Z"
	scopeDate    = "20060102"
)

// unsignedHeaders are left out of the signature: the transport may add or
// rewrite them after signing.
var unsignedHeaders = map[string]bool{
	"authorization":   true,
	"user-agent":      true,
	"content-length":  true,
	"accept-encoding": true,
	"connection":      true,
	"expect":          true,
	"x-amzn-trace-id": true,
}

// sign adds X-Amz-Date, X-Amz-Security-Token (with a session token) and
// the Authorization header to r, signing host and every other header of r
// but the unsigned ones. payload is the body; r.URL's escaped path is the
// path as sent.
func sign(r *http.Request, payload []byte, c Credentials, region, service string, now time.Time) {
	now = now.UTC()
	r.Header.Set("X-Amz-Date", now.Format(amzDate))
	if c.SessionToken != "" {
		r.Header.Set("X-Amz-Security-Token", c.SessionToken)
	}
	canonical, signed := canonicalRequest(r, payload)
	scope := now.Format(scopeDate) + "/" + region + "/" + service + "/aws4_request"
	toSign := sigAlgorithm + "\n" + now.Format(amzDate) + "\n" + scope + "\n" + hexSHA256([]byte(canonical))
	sig := hex.EncodeToString(hmacSHA256(signingKey(c.SecretAccessKey, now.Format(scopeDate), region, service), toSign))
	r.Header.Set("Authorization", sigAlgorithm+" Credential="+c.AccessKeyID+"/"+scope+", SignedHeaders="+signed+", Signature="+sig)
}

// signingKey derives the key of one day, region and service.
func signingKey(secret, date, region, service string) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), date)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, service)
	return hmacSHA256(k, "aws4_request")
}

// canonicalRequest returns the canonical form of r and its signed header
// list.
func canonicalRequest(r *http.Request, payload []byte) (canonical, signedHeaders string) {
	host := r.Host
	if host == "" {
		host = r.URL.Host
	}
	values := map[string][]string{"host": {host}}
	for k, vs := range r.Header {
		if k := strings.ToLower(k); !unsignedHeaders[k] {
			values[k] = append(values[k], vs...)
		}
	}
	names := make([]string, 0, len(values))
	for k := range values {
		names = append(names, k)
	}
	sort.Strings(names)
	var hb strings.Builder
	for _, k := range names {
		vs := make([]string, len(values[k]))
		for i, v := range values[k] {
			vs[i] = strings.Join(strings.Fields(v), " ") // trimmed, inner runs of spaces collapsed
		}
		hb.WriteString(k + ":" + strings.Join(vs, ",") + "\n")
	}
	signedHeaders = strings.Join(names, ";")
	canonical = strings.Join([]string{
		r.Method,
		canonicalURI(r.URL.EscapedPath()),
		canonicalQuery(r.URL.RawQuery),
		hb.String(),
		signedHeaders,
		hexSHA256(payload),
	}, "\n")
	return canonical, signedHeaders
}

// canonicalURI encodes each segment of the path as sent once more, as
// every service but S3 expects.
func canonicalURI(escaped string) string {
	if escaped == "" {
		return "/"
	}
	segs := strings.Split(escaped, "/")
	for i, s := range segs {
		segs[i] = uriEncode(s)
	}
	return strings.Join(segs, "/")
}

// canonicalQuery sorts the parameters by name, then value, each encoded.
func canonicalQuery(raw string) string {
	if raw == "" {
		return ""
	}
	var pairs [][2]string
	for _, kv := range strings.Split(raw, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		pairs = append(pairs, [2]string{uriEncode(unescape(k)), uriEncode(unescape(v))})
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i][0] != pairs[j][0] {
			return pairs[i][0] < pairs[j][0]
		}
		return pairs[i][1] < pairs[j][1]
	})
	out := make([]string, len(pairs))
	for i, p := range pairs {
		out[i] = p[0] + "=" + p[1]
	}
	return strings.Join(out, "&")
}

// uriEncode percent-encodes every byte but the unreserved characters
// A-Z a-z 0-9 - _ . ~, with upper-case hex digits.
func uriEncode(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

// unescape decodes a query component ("+" stays a plus, as AWS reads it);
// an invalid escape is kept as it is.
func unescape(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := hex.DecodeString(s[i+1 : i+3]); err == nil {
				b.WriteByte(v[0])
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

func hexSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
