-- +goose Up
-- An agent's runs by status (RunCounter.RunCount, the agent overview) and
-- by recency (RunList with an agent), without scanning every run.
CREATE INDEX runs_agent_status ON runs (agent, status);

-- +goose Down
DROP INDEX runs_agent_status;
