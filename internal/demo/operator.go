package demo

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/tool"
)

//go:embed operator.yaml
var operatorScript []byte

// OperatorInput is the user message of the operator demo run.
const OperatorInput = "Archive the order records older than 90 days."

type archiveArgs struct {
	Table         string `json:"table" jsonschema:"the table to archive"`
	OlderThanDays int    `json:"older_than_days" jsonschema:"archive rows older than this many days"`
}

// Operator returns the demo agent whose tool calls need a human's approval.
func Operator(o Options) (*stepwise.Agent, error) {
	script := operatorScript
	if o.Fast {
		script = fast(script)
	}
	m, err := scripted.Parse("operator", script)
	if err != nil {
		return nil, err
	}
	archive := tool.New("archive_records", "Archive old rows of a table (irreversible).",
		func(ctx context.Context, a archiveArgs) (string, error) {
			return fmt.Sprintf("archived rows of %s older than %d days", a.Table, a.OlderThanDays), nil
		})
	return &stepwise.Agent{
		Name:         "operator",
		Description:  "Performs maintenance operations; risky ones need approval.",
		Instructions: "You maintain the database. Ask for approval before irreversible operations.",
		Model:        m,
		Tools:        []tool.Tool{archive},
		Approvals:    map[string]stepwise.ApprovalPolicy{"archive_records": stepwise.ApproveAlways},
	}, nil
}
