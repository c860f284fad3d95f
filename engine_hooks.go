package stepwise

// OnCommit registers fn to be called with each step this engine commits
// while executing runs (user, llm, tool, agent, input, decision, custom and
// error steps), after the commit is durable and in commit order per session.
//
// fn runs on the executing goroutine, inside the session's commit lock: it
// must return quickly and never block (hand the step to a channel without
// waiting, as recall.Worker does), and it must not modify the step. Steps
// written outside an execution (ingest, edited forks, answers to input
// requests) are not reported; a consumer that needs every step also scans
// the store. Registering is safe at any time, concurrently with runs.
func (e *Engine) OnCommit(fn func(*Step)) {
	if fn == nil {
		return
	}
	e.hooksMu.Lock()
	e.hooks = append(e.hooks, fn)
	e.hooksMu.Unlock()
}

// runCommitHooks calls the OnCommit callbacks with committed steps.
func (e *Engine) runCommitHooks(steps []*Step) {
	e.hooksMu.RLock()
	fns := e.hooks
	e.hooksMu.RUnlock()
	for _, fn := range fns {
		for _, s := range steps {
			fn(s)
		}
	}
}

// afterCommit runs after steps of an execution are durable: it calls the
// commit hooks. (Other instances hear of the commit from the store, whose
// notification committed with it.)
func (e *Engine) afterCommit(steps []*Step) {
	e.addAttachments(steps)
	e.runCommitHooks(steps)
}
