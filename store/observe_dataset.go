package store

import (
	"encoding/json"
	"time"
)

// Dataset is a named list of inputs with optional expected outputs.
type Dataset struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Description string    `json:"description,omitempty"`
	ItemCount   int64     `json:"item_count"`
	CreatedAt   time.Time `json:"created_at"`
}

// DatasetItem is one input of a dataset.
type DatasetItem struct {
	DatasetID string          `json:"dataset_id"`
	Index     int64           `json:"index"` // position from 0; set by the store
	Input     string          `json:"input"`
	Expected  string          `json:"expected,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
}

// DatasetCreateParams are the parameters of ObservationStore.DatasetCreate.
type DatasetCreateParams struct {
	Dataset *Dataset // ID and Name required
	Items   []*DatasetItem
	Now     time.Time
}

// DatasetGetParams select a dataset by ID or Name.
type DatasetGetParams struct{ ID, Name string }

// DatasetListParams are the parameters of ObservationStore.DatasetList.
type DatasetListParams struct{ Limit int }

// DatasetItemListParams page through the items of a dataset.
type DatasetItemListParams struct {
	DatasetID string
	Offset    int64
	Limit     int
}

// ExperimentStatus is the state of an experiment.
type ExperimentStatus string

// Experiment statuses.
const (
	ExperimentRunning   ExperimentStatus = "running"
	ExperimentCompleted ExperimentStatus = "completed"
	ExperimentFailed    ExperimentStatus = "failed"
	ExperimentCancelled ExperimentStatus = "cancelled"
)

// Experiment is one run of an agent over a dataset, with its evaluation.
type Experiment struct {
	ID         string           `json:"id"`
	Name       string           `json:"name"`
	DatasetID  string           `json:"dataset_id"`
	Agent      string           `json:"agent"`
	Status     ExperimentStatus `json:"status"`
	Config     json.RawMessage  `json:"config,omitempty"`  // as recorded by the runner
	Summary    json.RawMessage  `json:"summary,omitempty"` // aggregate results
	Error      string           `json:"error,omitempty"`
	CreatedAt  time.Time        `json:"created_at"`
	UpdatedAt  time.Time        `json:"updated_at"`
	FinishedAt time.Time        `json:"finished_at,omitzero"`
}

// ExperimentItem is the result of one dataset item in an experiment.
type ExperimentItem struct {
	ExperimentID string             `json:"experiment_id"`
	Index        int64              `json:"index"` // the dataset item's Index
	SessionID    string             `json:"session_id,omitempty"`
	RunID        string             `json:"run_id,omitempty"`
	Status       string             `json:"status"` // the run's status, or "error"
	Output       string             `json:"output,omitempty"`
	Error        string             `json:"error,omitempty"`
	Scores       map[string]float64 `json:"scores,omitempty"` // eval name → score
	Duration     time.Duration      `json:"duration"`
	InputTokens  int64              `json:"input_tokens"`
	OutputTokens int64              `json:"output_tokens"`
	Cost         float64            `json:"cost"`
	UpdatedAt    time.Time          `json:"updated_at"`
}

// ExperimentCreateParams are the parameters of
// ObservationStore.ExperimentCreate.
type ExperimentCreateParams struct {
	Experiment *Experiment // ID, Name, DatasetID, Agent required; Status defaults to running
	Now        time.Time
}

// ExperimentGetParams select an experiment by ID or Name.
type ExperimentGetParams struct{ ID, Name string }

// ExperimentListParams filter experiments.
type ExperimentListParams struct {
	DatasetID string
	Limit     int
}

// ExperimentUpdateParams change an experiment; nil fields are left.
type ExperimentUpdateParams struct {
	ID      string
	Status  *ExperimentStatus
	Summary json.RawMessage
	Error   *string
	Now     time.Time
}

// ExperimentItemPutParams are the parameters of
// ObservationStore.ExperimentItemPut.
type ExperimentItemPutParams struct {
	Item *ExperimentItem // ExperimentID required
	Now  time.Time
}

// ExperimentItemListParams are the parameters of
// ObservationStore.ExperimentItemList.
type ExperimentItemListParams struct{ ExperimentID string }
