package stepwise

// afterCommit runs after steps of an execution are durable: it wakes other
// instances' subscribers and calls the commit hooks.
func (e *Engine) afterCommit(steps []*Step) {
	e.notifyCommit(steps[0].SessionID)
	e.runCommitHooks(steps)
}
