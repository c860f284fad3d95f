package cli

import (
	"errors"
	"fmt"
	"io"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/stepwise-run/stepwise/server/mcpserver"
)

func init() { register(mcpCmd) }

func mcpCmd(e *env) *cobra.Command {
	var agentsDir string
	var agentFiles []string
	c := &cobra.Command{
		Use:   "mcp [--agent FILE] [--agents DIR]",
		Short: "Serve the database as an MCP server on stdin/stdout",
		Long: `Serve the database as a Model Context Protocol server on stdin and stdout
(newline-delimited JSON-RPC), for a coding agent or an IDE: tools to list and
search sessions, read steps, render traces, search past steps, list and answer
pending requests, start runs, fork and retry; sessions are resources
(stepwise://sessions/{id}, …/trace). Runs started or resumed here execute in
this process, with the built-in agents, every --agent FILE and the agent files
of --agents DIR. Nothing but MCP messages is written to stdout. A server has the
same tools at /mcp (streamable HTTP): use that instead of --server.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if e.server != "" {
				return usagef("stepwise mcp serves a database (--db); a server has its MCP endpoint at %s/mcp (streamable HTTP)", e.server)
			}
			ctx := cmd.Context()
			files := append([]string(nil), agentFiles...)
			if agentsDir != "" {
				found, err := agentFilesIn(agentsDir)
				if err != nil {
					return err
				}
				files = append(files, found...)
			}
			rt, err := e.open(ctx, "", files...)
			if err != nil {
				return err
			}
			defer rt.Close()
			if err := rt.eng.Start(ctx); err != nil {
				return err
			}
			srv, err := mcpserver.New(mcpserver.Config{Engine: rt.eng, Embedder: rt.embedder})
			if err != nil {
				return err
			}
			t := &sdk.IOTransport{Reader: io.NopCloser(e.stdin), Writer: nopWriteCloser{e.stdout}}
			if err := srv.Run(ctx, t); err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
				return fmt.Errorf("mcp: %w", err)
			}
			return nil
		},
	}
	c.Flags().StringVar(&agentsDir, "agents", "", "directory of agent files")
	c.Flags().StringSliceVar(&agentFiles, "agent", nil, "agent file (repeatable)")
	return c
}

// nopWriteCloser leaves the command's stdout open when the MCP session
// ends.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
