package steptype

// Progress is what a step reported about how far its run has come: a
// fraction in [0,1] when the step knows one, and a message. A nil Fraction
// means "no fraction known" (a message alone is allowed).
type Progress struct {
	Fraction *float64 `json:"fraction,omitempty"`
	Message  string   `json:"message,omitempty"`
}
