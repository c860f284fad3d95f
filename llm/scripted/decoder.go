package scripted

import "github.com/stepwise-run/stepwise/internal/yamlnode"

// ParseError is one problem in a script file, located by line and field.
type ParseError = yamlnode.ParseError

// decoder adds this format's sections to the shared strict YAML walker.
type decoder struct{ *yamlnode.Decoder }
