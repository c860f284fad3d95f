// Package observe is the observation layer of Stepwise: what a
// person debugging an agent looks at beside the step log.
//
//   - Annotations: state, goal and action of a step, set by custom steps
//     (Scope.Annotate) or later through Annotate, with model-written
//     summaries produced in the background by a Summarizer.
//   - Attachments: screenshots, images and files of a step, stored once by
//     content hash, with a size limit and a content-type check.
//   - Events inside steps: the provider request and response of each model
//     call, tool invocations, HTTP exchanges (Transport) and sub-calls
//     (stepwise.RecordStepEvent), with credentials redacted, recorded by a
//     Recorder; payloads over 64 KiB are stored out of line.
//   - Masking: a Masker of e-mail addresses, card numbers and API keys,
//     registered as the engine's mask hook, applied before anything is
//     persisted.
//
// Everything is kept by a store implementing store.ObservationStore, beside
// the immutable step rows. The services that react to the engine
// (Recorder, Summarizer) are stepwise.Observers: they run on their own
// goroutines, never on a run's critical path.
//
//	st, _ := sqlite.Open(ctx, sqlite.Config{Path: "stepwise.db"})
//	e, _ := stepwise.New(stepwise.Config{Store: st, Agents: agents})
//
//	masker := observe.NewMasker(observe.MaskConfig{})
//	e.Mask(masker.Step)
//
//	rec, _ := observe.NewRecorder(observe.RecorderConfig{Store: st, Mask: masker.Text})
//	defer e.Observe(rec)()
//
//	sum, _ := observe.NewSummarizer(observe.SummarizerConfig{Store: st, Model: cheapModel})
//	defer e.Observe(sum)()
//
//	files, _ := observe.NewAttachments(st, observe.AttachmentConfig{})
//	att, err := files.Add(ctx, observe.AttachParams{StepID: id, Name: "page.png", Kind: observe.KindScreenshot, Data: png})
package observe
