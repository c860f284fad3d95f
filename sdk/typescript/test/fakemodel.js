// A local OpenAI-compatible chat-completions server (streamed SSE chunks,
// as the real API sends them) for the worker tests: a worker may not
// register a scripted model (it reads a file of the server), so the agents
// it registers use `openai:fake` with this server as their base_url.
//
// A reply is chosen like the scripted model's grouped form: k, the number
// of assistant messages after the last user message, picks turns[k] (the
// last turn answers every later call). A turn is {text} or
// {toolCalls: [{name, arguments}]}; tool call ids are call_<p>_<i>, p the
// assistant messages of the whole request.

import http from 'node:http';

export async function fakeModel(turns) {
  const requests = [];
  const srv = http.createServer((req, res) => {
    let body = '';
    req.on('data', (b) => (body += b));
    req.on('end', () => {
      if (!req.url.endsWith('/chat/completions')) {
        res.writeHead(404).end();
        return;
      }
      const r = JSON.parse(body);
      requests.push(r);
      const msgs = r.messages || [];
      let lastUser = -1;
      msgs.forEach((m, i) => m.role === 'user' && (lastUser = i));
      const k = msgs.slice(lastUser + 1).filter((m) => m.role === 'assistant').length;
      const p = msgs.filter((m) => m.role === 'assistant').length;
      const turn = typeof turns === 'function' ? turns(r, k) : turns[Math.min(k, turns.length - 1)];
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      const chunk = (delta, finish) =>
        res.write(
          `data: ${JSON.stringify({ id: 'chatcmpl-fake', object: 'chat.completion.chunk', created: 1, model: 'fake', choices: [{ index: 0, delta, finish_reason: finish ?? null }] })}\n\n`,
        );
      if (turn.toolCalls?.length) {
        turn.toolCalls.forEach((c, i) => {
          const head = { index: i, id: `call_${p}_${i}`, type: 'function', function: { name: c.name, arguments: '' } };
          chunk(i === 0 ? { role: 'assistant', content: null, tool_calls: [head] } : { tool_calls: [head] });
          chunk({ tool_calls: [{ index: i, function: { arguments: JSON.stringify(c.arguments ?? {}) } }] });
        });
        chunk({}, 'tool_calls');
      } else {
        chunk({ role: 'assistant', content: '' });
        chunk({ content: turn.text ?? '' });
        chunk({}, 'stop');
      }
      res.write(`data: ${JSON.stringify({ id: 'chatcmpl-fake', object: 'chat.completion.chunk', created: 1, model: 'fake', choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } })}\n\n`);
      res.end('data: [DONE]\n\n');
    });
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${srv.address().port}/v1`;
  return {
    url,
    requests,
    /** The model fields of an agent definition that uses this server. */
    model: 'openai:fake',
    modelOptions: { baseUrl: url, apiKeyEnv: 'STEPWISE_SDK_FAKE_KEY' },
    close: () =>
      new Promise((r) => {
        srv.closeAllConnections();
        srv.close(r);
      }),
  };
}
