package otlpingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The export requests and responses of OTLP/HTTP are read and written here
// by hand rather than with the collector's generated service packages
// (go.opentelemetry.io/proto/otlp/collector/...), whose gRPC stubs would
// link gRPC into the binary. Both requests have a single field,
// `repeated ResourceSpans resource_spans = 1` and
// `repeated ResourceLogs resource_logs = 1`, decoded with the OTLP data
// types; both responses are `ExportPartialSuccess partial_success = 1`
// with `int64 rejected_<items> = 1` and `string error_message = 2`.

// errMalformed is a protobuf envelope that cannot be parsed.
var errMalformed = errors.New("malformed field")

// decodeEnvelope decodes each `repeated <T> … = 1` element of a protobuf
// export request with newItem; other fields are skipped, as unknown fields
// are by protobuf.
func decodeEnvelope[T proto.Message](b []byte, newItem func() T) ([]T, error) {
	var out []T
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(n))
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(n))
			}
			m := newItem()
			if err := proto.Unmarshal(v, m); err != nil {
				return nil, err
			}
			out = append(out, m)
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return nil, fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return out, nil
}

// decodeJSONEnvelope decodes the elements of an OTLP/JSON export request's
// array field (lowerCamelCase or the proto name) with newItem; b has its
// ids rewritten to base64 already. Unknown fields are ignored.
func decodeJSONEnvelope[T proto.Message](b []byte, camel, snake string, newItem func() T) ([]T, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, err
	}
	if top == nil {
		return nil, errors.New("the export request is not a JSON object")
	}
	var out []T
	for _, name := range []string{camel, snake} {
		raw, ok := top[name]
		if !ok {
			continue
		}
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		for _, it := range items {
			m := newItem()
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(it, m); err != nil {
				return nil, fmt.Errorf("%s: %v", name, err)
			}
			out = append(out, m)
		}
	}
	return out, nil
}

// encodeResponse writes an Export*ServiceResponse: empty when nothing was
// rejected, else its partial_success with the count under countField
// (rejectedSpans, rejectedLogRecords) in JSON.
func encodeResponse(res *Result, isJSON bool, countField string) []byte {
	if isJSON {
		if res.Rejected == 0 {
			return []byte("{}")
		}
		ps := map[string]string{countField: strconv.FormatInt(res.Rejected, 10)} // int64 is a string in proto3 JSON
		if res.Message != "" {
			ps["errorMessage"] = res.Message
		}
		b, _ := json.Marshal(map[string]any{"partialSuccess": ps})
		return b
	}
	if res.Rejected == 0 {
		return nil
	}
	var ps []byte
	ps = protowire.AppendTag(ps, 1, protowire.VarintType)
	ps = protowire.AppendVarint(ps, uint64(res.Rejected))
	if res.Message != "" {
		ps = protowire.AppendTag(ps, 2, protowire.BytesType)
		ps = protowire.AppendString(ps, res.Message)
	}
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendBytes(b, ps)
}
