// An MCP server (stdio) on the official TypeScript SDK whose tool asks the
// user during the call (elicitation/create), for Stepwise's elicitation
// tests. Tool book_table asks for the party size and a note, then books;
// its result has structured content. Every call is appended as a JSON line
// to the file named by CALL_LOG: the day, the idempotency key from _meta,
// and what the elicitation returned.
import { appendFileSync } from "node:fs";
import { z } from "zod";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";

const log = (entry) => {
  if (process.env.CALL_LOG) appendFileSync(process.env.CALL_LOG, JSON.stringify(entry) + "\n");
};

const server = new McpServer({ name: "booking", version: "1.0.0" });
server.registerTool(
  "book_table",
  {
    description: "Book a table; asks the user for the party size.",
    inputSchema: { day: z.string() },
    outputSchema: { booked: z.boolean(), day: z.string(), party_size: z.number(), note: z.string(), idempotency_key: z.string() },
  },
  async ({ day }, extra) => {
    const key = extra._meta?.["stepwise.run/idempotency-key"] ?? "";
    let answer;
    try {
      answer = await server.server.elicitInput(
        {
          message: `How many people for ${day}?`,
          requestedSchema: {
            type: "object",
            properties: {
              party_size: { type: "integer", minimum: 1, maximum: 12, description: "number of people" },
              note: { type: "string", description: "anything we should know" },
            },
            required: ["party_size"],
          },
        },
        { signal: extra.signal },
      );
    } catch (e) {
      log({ day, key, error: String(e) });
      throw e;
    }
    log({ day, key, action: answer.action, content: answer.content ?? null, aborted: extra.signal.aborted });
    if (answer.action !== "accept") {
      return { content: [{ type: "text", text: `not booked: ${answer.action}` }], isError: true };
    }
    const out = { booked: true, day, party_size: answer.content.party_size, note: answer.content.note ?? "", idempotency_key: key };
    return { content: [{ type: "text", text: `Booked ${out.party_size} for ${day}.` }], structuredContent: out };
  },
);
await server.connect(new StdioServerTransport());
