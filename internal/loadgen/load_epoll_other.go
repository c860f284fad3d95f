//go:build !linux

package loadgen

import (
	"context"
	"errors"
)

// readLoadStreamsSupported reports whether readLoadStreams works here: it
// waits on epoll, which only Linux has.
const readLoadStreamsSupported = false

// readLoadStreams is not available here: see the Linux version.
func readLoadStreams(context.Context, loadClientConfig, func()) (*loadClientResult, error) {
	return nil, errors.New("load client: reading the streams with epoll needs Linux")
}
