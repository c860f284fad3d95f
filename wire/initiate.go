package wire

// InitiateOption adjusts the run a protocol client's Initiate starts.
type InitiateOption func(*InitiateRequest)

// InSession continues an existing session (multi-turn).
func InSession(id string) InitiateOption { return func(r *InitiateRequest) { r.SessionID = id } }

// WithMetadata sets the metadata of the new session the run starts.
func WithMetadata(m map[string]any) InitiateOption {
	return func(r *InitiateRequest) { r.Metadata = m }
}

// WithBreakpoints pauses the run before or after the steps b selects.
func WithBreakpoints(b *Breakpoints) InitiateOption {
	return func(r *InitiateRequest) { r.Breakpoints = b }
}
