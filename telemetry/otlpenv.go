package telemetry

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// ErrOTLPConfig is returned by NewOTLPExporter (and New) for an invalid
// OTEL_EXPORTER_OTLP_* variable or OTLPConfig field.
var ErrOTLPConfig = errors.New("stepwise: telemetry: invalid OTLP exporter configuration")

// DefaultOTLPEndpoint is the trace endpoint when neither the config nor the
// environment names one (the OTLP/HTTP default).
const DefaultOTLPEndpoint = "http://localhost:4318/v1/traces"

// env returns OTEL_EXPORTER_OTLP_TRACES_<name>, else OTEL_EXPORTER_OTLP_<name>,
// and the variable it came from.
func env(name string) (string, string) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_" + name, "OTEL_EXPORTER_OTLP_" + name} {
		if v := strings.TrimSpace(os.Getenv(k)); v != "" {
			return v, k
		}
	}
	return "", ""
}

// CaptureContentEnv is the variable of the GenAI semantic conventions that
// turns on message content in spans (Config.CaptureContent).
const CaptureContentEnv = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

// captureFromEnv reads CaptureContentEnv: true or false in any case, unset
// or empty is false.
func captureFromEnv() (bool, error) {
	switch v := strings.TrimSpace(os.Getenv(CaptureContentEnv)); strings.ToLower(v) {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, configErr("%s=%s: want true or false", CaptureContentEnv, v)
	}
}

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrOTLPConfig, fmt.Sprintf(format, args...))
}

// fromEnv fills the zero fields of cfg from the environment and the
// defaults, and checks them.
func (cfg *OTLPConfig) fromEnv() error {
	from := "OTLPConfig.Endpoint"
	if cfg.Endpoint == "" {
		if v := strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")); v != "" {
			cfg.Endpoint, from = v, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" // the signal's endpoint is used as is
		} else if v := strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")); v != "" {
			cfg.Endpoint, from = strings.TrimSuffix(v, "/")+"/v1/traces", "OTEL_EXPORTER_OTLP_ENDPOINT"
		} else {
			cfg.Endpoint = DefaultOTLPEndpoint
		}
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return configErr("%s: %q is not an http:// or https:// URL", from, cfg.Endpoint)
	}
	if v, k := env("PROTOCOL"); v != "" && v != "http/protobuf" {
		return configErr("%s=%s: only http/protobuf is supported", k, v)
	}
	if cfg.Headers == nil {
		v, k := env("HEADERS")
		if cfg.Headers, err = parseHeaders(v); err != nil {
			return configErr("%s: %v", k, err)
		}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
		if v, k := env("TIMEOUT"); v != "" {
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil || ms <= 0 {
				return configErr("%s=%q: want a positive number of milliseconds", k, v)
			}
			cfg.Timeout = time.Duration(ms) * time.Millisecond
		}
	}
	from = "OTLPConfig.Compression"
	if cfg.Compression == "" {
		cfg.Compression, from = env("COMPRESSION")
	}
	switch cfg.Compression {
	case "", "none":
		cfg.Compression = "none"
	case "gzip":
	default:
		return configErr("%s=%q: want gzip or none", from, cfg.Compression)
	}
	if cfg.RetryInterval == 0 {
		cfg.RetryInterval = 5 * time.Second
	}
	if cfg.RetryMaxElapsed == 0 {
		cfg.RetryMaxElapsed = time.Minute
	}
	if cfg.Client == nil {
		tc, err := tlsFromEnv()
		if err != nil {
			return err
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tc
		cfg.Client = &http.Client{Transport: tr}
	}
	return nil
}

// parseHeaders reads "k1=v1,k2=v2" with percent-encoded values (the W3C
// baggage format of OTEL_EXPORTER_OTLP_HEADERS).
func parseHeaders(s string) (map[string]string, error) {
	h := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t\"(),/:;<=>?@[\\]{}") {
			return nil, fmt.Errorf("%q is not key=value", part)
		}
		val, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("header %s: %v", k, err)
		}
		h[k] = val
	}
	return h, nil
}

// tlsFromEnv reads OTEL_EXPORTER_OTLP_[TRACES_]CERTIFICATE (trusted CAs,
// PEM) and CLIENT_CERTIFICATE / CLIENT_KEY (mutual TLS); nil when none is
// set.
func tlsFromEnv() (*tls.Config, error) {
	ca, caVar := env("CERTIFICATE")
	cert, certVar := env("CLIENT_CERTIFICATE")
	key, keyVar := env("CLIENT_KEY")
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, configErr("%s: %v", caVar, err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, configErr("%s: no PEM certificate in %s", caVar, ca)
		}
	}
	if (cert == "") != (key == "") {
		return nil, configErr("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY go together")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, configErr("%s / %s: %v", certVar, keyVar, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}
