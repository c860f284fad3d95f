//go:build linux

package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// readLoadStreamsSupported reports whether readLoadStreams works here.
const readLoadStreamsSupported = true

// rawStream is a subscriber of readLoadStreams: a session, its connection
// (a socket of its own, outside Go's network poller) and the stream's
// decoder and check.
type rawStream struct {
	sessionID string
	fd        int
	wire      wireStream
	check     streamCheck
	err       error // a failed POST of the run, reported at the end
	done      bool
}

// readLoadStreams is runLoadClients with the streams read by one goroutine
// waiting on epoll for all connections at once, instead of a goroutine and
// net/http reader per stream: a read becomes one read system call for
// what arrived (level-triggered readiness, no second read to learn that
// nothing more is there) and no goroutine wake-up per event, so the client
// process costs less of the CPU it shares with the server it measures. The
// byte stream is the same (an HTTP/1.1 GET whose chunked response is
// decoded here, wireStream) and each line is checked and measured as
// before (streamCheck). Sessions and runs are created through net/http.
func readLoadStreams(ctx context.Context, cfg loadClientConfig, ready func()) (*loadClientResult, error) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Runs, DisableCompression: true}} // as many as runLoadClients keeps for its POSTs
	defer hc.CloseIdleConnections()
	u, err := url.Parse(cfg.Base)
	if err != nil {
		return nil, err
	}
	addr, err := netip.ParseAddrPort(u.Host)
	if err != nil {
		return nil, fmt.Errorf("load client: %s is not an IP address and port: %w", u.Host, err)
	}
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll: %w", err)
	}
	defer syscall.Close(epfd)
	streams := make([]*rawStream, cfg.Runs)
	defer func() {
		for _, st := range streams {
			if st != nil && st.fd >= 0 {
				syscall.Close(st.fd)
			}
		}
	}()
	// Phase 1: every subscriber connects (its response head read). Phase
	// 2, once all are connected: every run starts.
	err = forEachLimited(cfg.Runs, 64, func(i int) error {
		sid, err := createLoadSession(ctx, hc, cfg.Base)
		if err != nil {
			return err
		}
		st := &rawStream{sessionID: sid, fd: -1}
		st.check.init(cfg, sid)
		streams[i] = st
		if st.fd, err = dialStream(addr, u.Host, "/v1/sessions/"+sid+"/events"); err != nil {
			return err
		}
		if err := st.readHead(); err != nil {
			return err
		}
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(i)}
		return syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, st.fd, &ev)
	})
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	ready()
	// A run that could not start ends the streams' loop.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	wait := goRamped(cfg, start, func(i int) {
		st := streams[i]
		id, err := startLoadRun(ctx, hc, cfg.Base, st.sessionID)
		if err != nil {
			st.err = err
			cancel()
			return
		}
		st.check.setRun(id)
	})
	errLoop := pollStreams(ctx, epfd, streams)
	wait()
	elapsed := time.Since(start)
	errs := []error{errLoop}
	checks := make([]*streamCheck, len(streams))
	for i, st := range streams {
		checks[i] = &st.check
		errs = append(errs, st.err)
		if st.err == nil && errLoop == nil {
			errs = append(errs, st.check.confirm())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return loadResultOf(checks, elapsed), nil
}

// pollStreams reads the streams as data arrives until every run finished
// (or its stream failed: the errors are the streams').
func pollStreams(ctx context.Context, epfd int, streams []*rawStream) error {
	buf := make([]byte, 64<<10)
	events := make([]syscall.EpollEvent, 256)
	left := len(streams)
	var errs []error
	end := func(st *rawStream, err error) {
		st.done = true
		left--
		_ = syscall.EpollCtl(epfd, syscall.EPOLL_CTL_DEL, st.fd, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("stream of %s: %w", st.check.name(), err))
		}
	}
	for left > 0 {
		n, err := syscall.EpollWait(epfd, events, 100)
		if err != nil && err != syscall.EINTR {
			return fmt.Errorf("epoll: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, ev := range events[:max(n, 0)] {
			st := streams[ev.Fd]
			if st.done {
				continue
			}
			// One read takes what arrived; if more is left, the
			// descriptor is still ready at the next wait.
			m, err := syscall.Read(st.fd, buf)
			switch {
			case err == syscall.EAGAIN || err == syscall.EINTR:
				continue
			case err != nil:
				end(st, err)
				continue
			case m == 0:
				end(st, errStreamEnded)
				continue
			}
			if done, err := st.wire.feed(buf[:m], &st.check); err != nil || done {
				end(st, err)
			}
		}
	}
	return errors.Join(errs...)
}

// dialStream connects a blocking TCP socket to addr and sends a GET of path
// on it.
func dialStream(addr netip.AddrPort, host, path string) (int, error) {
	family := syscall.AF_INET
	var sa syscall.Sockaddr = &syscall.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()}
	if !addr.Addr().Is4() {
		family = syscall.AF_INET6
		sa = &syscall.SockaddrInet6{Port: int(addr.Port()), Addr: addr.Addr().As16()}
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, syscall.IPPROTO_TCP)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	fail := func(op string, err error) (int, error) {
		syscall.Close(fd)
		return -1, fmt.Errorf("%s %s: %w", op, host, err)
	}
	if err := syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1); err != nil {
		return fail("nodelay", err)
	}
	tv := syscall.NsecToTimeval((30 * time.Second).Nanoseconds())
	for _, opt := range []int{syscall.SO_RCVTIMEO, syscall.SO_SNDTIMEO} {
		if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, opt, &tv); err != nil {
			return fail("timeout", err)
		}
	}
	if err := syscall.Connect(fd, sa); err != nil {
		return fail("connect", err)
	}
	req := []byte("GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nAccept: text/event-stream\r\nUser-Agent: stepwise-load\r\n\r\n")
	for len(req) > 0 {
		n, err := syscall.Write(fd, req)
		if err != nil {
			return fail("write", err)
		}
		req = req[n:]
	}
	return fd, nil
}

// readHead reads (blocking) until the response head is decoded, then makes
// the socket non-blocking for pollStreams.
func (st *rawStream) readHead() error {
	buf := make([]byte, 4<<10)
	for !st.wire.head {
		n, err := syscall.Read(st.fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("subscribe: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("subscribe: %w", errStreamEnded)
		}
		if _, err := st.wire.feed(buf[:n], &st.check); err != nil {
			return err
		}
	}
	return syscall.SetNonblock(st.fd, true)
}
