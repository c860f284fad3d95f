package stepwise

// SetTestHookAnswerPublish makes every Answer run f between its commit and
// its publication; restore undoes it. Not for parallel tests.
func SetTestHookAnswerPublish(f func()) (restore func()) {
	old := testHookAnswerPublish
	testHookAnswerPublish = f
	return func() { testHookAnswerPublish = old }
}
