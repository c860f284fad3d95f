package memory_test

import (
	"testing"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		st := memory.New()
		t.Cleanup(func() { st.Close() })
		return st
	}, storetest.Options{Exclusive: true})
}
