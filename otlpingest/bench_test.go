package otlpingest_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/otlpingest"
	"github.com/stepwise-run/stepwise/server"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// BenchmarkIngestSpans: OTLP/HTTP protobuf exports of 512 GenAI chat spans
// (one trace each) into SQLite, recorded synchronously (Settle < 0).
func BenchmarkIngestSpans(b *testing.B) {
	e := newEnv(b, server.Config{OTLP: otlpingest.Config{Settle: -1}})
	t0 := time.Now()
	bodies := make([][]byte, b.N)
	for i := range bodies {
		batch := make([]*tracepb.Span, 512)
		for j := range batch {
			batch[j] = chatSpan(1000+i, j+1, 1<<40, t0.Add(time.Duration(j)*time.Microsecond), "answer")
		}
		bodies[i] = export(batch...)
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if code, body := e.post("/v1/traces", pb, bodies[i]); code != 200 {
			b.Fatalf("%d %s", code, body)
		}
	}
	b.ReportMetric(float64(512*b.N)/time.Since(start).Seconds(), "spans/s")
}

// BenchmarkExportToStream: latency from an export of one chat span (a
// root span: no parent to wait for) to its llm step on a session stream
// subscribed beforehand, with the default settle window and without it.
func BenchmarkExportToStream(b *testing.B) {
	for _, settle := range []time.Duration{-1, 0} {
		b.Run(fmt.Sprintf("settle=%v", settle), func(b *testing.B) {
			e := newEnv(b, server.Config{OTLP: otlpingest.Config{Settle: settle}})
			var total time.Duration
			for i := 0; i < b.N; i++ {
				trace := 5000 + i
				sid := otlpingest.TraceSessionID(fmt.Sprintf("%032x", trace))
				// The first export creates the session; the measured one follows.
				e.post("/v1/traces", pb, export(chatSpan(trace, 1, 0, time.Now(), "warm")))
				e.waitSteps(sid, 2)
				ctx, cancel := context.WithCancel(context.Background())
				events := e.eng.Subscribe(ctx, stepwise.SubscribeParams{SessionID: sid, After: stepwise.Position{Seq: 2}})
				body := export(chatSpan(trace, 2, 0, time.Now(), "measured"))
				start := time.Now()
				go func() {
					req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/traces", bytes.NewReader(body))
					req.Header.Set("Content-Type", pb)
					req.Header.Set("Authorization", "Bearer "+e.token)
					resp, err := http.DefaultClient.Do(req)
					if err == nil {
						resp.Body.Close()
					}
				}()
				for ev, err := range events {
					if err != nil {
						b.Fatal(err)
					}
					if ev.Type == stepwise.EventStepCompleted && ev.Step.Content == "measured" {
						total += time.Since(start)
						break
					}
				}
				cancel()
			}
			b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/export")
		})
	}
}
