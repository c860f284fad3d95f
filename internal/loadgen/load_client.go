package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"
)

// ClientEnv is set (to "1") in the environment of the client process
// Run starts for Config.ClientCommand: the program that finds it
// calls ClientMain.
const ClientEnv = "STEPWISE_LOAD_CLIENT"

// ClientReaderEnv, set to "net/http" in the environment of the client
// process, makes it read each stream on a goroutine of its own through
// net/http (as the in-process clients do) instead of all streams on one
// goroutine waiting on epoll (Linux; readLoadStreams): to compare the two.
const ClientReaderEnv = "STEPWISE_LOAD_CLIENT_READER"

// IsClient reports whether this process was started by Run as its
// client process.
func IsClient() bool { return os.Getenv(ClientEnv) == "1" }

// ClientMain is the client process of Run: it reads the clients'
// configuration (JSON) from standard input, connects the subscribers and
// reports on file descriptor 3, one JSON line when all are connected (the
// measurement starts), then one with the result. Its standard output stays
// free for whatever else the program prints.
func ClientMain(ctx context.Context) error {
	out := os.NewFile(3, "load-results")
	if out == nil {
		return errors.New("load client: no results pipe (fd 3)")
	}
	defer out.Close()
	return loadClientMain(ctx, os.Stdin, out)
}

func loadClientMain(ctx context.Context, in io.Reader, out io.Writer) error {
	var cfg loadClientConfig
	if err := json.NewDecoder(in).Decode(&cfg); err != nil {
		return fmt.Errorf("load client: read config: %w", err)
	}
	// A load generator, not the server it stands for: it runs at the
	// server's collector target too, to stay cheap.
	defer TuneGC(0)()
	enc := json.NewEncoder(out)
	var cpu0 time.Duration
	read := readLoadStreams
	if !readLoadStreamsSupported || os.Getenv(ClientReaderEnv) == "net/http" {
		read = runLoadClients
	}
	res, err := read(ctx, cfg, func() {
		cpu0 = processCPU()
		_ = enc.Encode(loadClientResult{})
	})
	if err != nil {
		res = &loadClientResult{Err: err.Error()}
	} else {
		res.CPU = processCPU() - cpu0
	}
	return enc.Encode(res)
}

// runClientProcess starts argv as Run's client process, hands it cfg,
// calls ready when it reports its subscribers connected and returns what it
// measured.
func runClientProcess(ctx context.Context, argv []string, cfg loadClientConfig, ready func()) (*loadClientResult, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		pw.Close()
		return nil, err
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), ClientEnv+"=1")
	cmd.Stdin = bytes.NewReader(cfgJSON)
	var output bytes.Buffer // shown if it fails (a test binary prints PASS)
	cmd.Stdout, cmd.Stderr = &output, &output
	cmd.ExtraFiles = []*os.File{pw}
	if err := cmd.Start(); err != nil {
		pw.Close()
		return nil, fmt.Errorf("client process: %w", err)
	}
	pw.Close() // the child holds its copy; EOF when it exits
	dec := json.NewDecoder(bufio.NewReader(pr))
	var first, res loadClientResult
	errRead := dec.Decode(&first)
	if errRead == nil {
		ready()
		errRead = dec.Decode(&res)
	}
	errWait := cmd.Wait()
	switch {
	case errRead == nil && res.Err != "":
		return nil, fmt.Errorf("client process: %s", res.Err)
	case errRead != nil:
		return nil, fmt.Errorf("client process: %w; its output: %s", errors.Join(errRead, errWait), output.Bytes()[max(0, output.Len()-4096):])
	}
	return &res, nil
}
