// A Server-Sent Events reader over fetch's body: bytes in, one
// {id, event, data} per dispatched event out (the WHATWG parsing rules:
// CR, LF or CRLF line ends, comments ignored, multi-line data joined).

/**
 * @param {ReadableStream<Uint8Array>} body
 * @returns {AsyncGenerator<{id: string|undefined, event: string, data: string}>}
 */
export async function* readEvents(body) {
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let buf = '';
  let data = [];
  let event = '';
  let id;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buf += done ? decoder.decode() : decoder.decode(value, { stream: true });
      for (;;) {
        const m = /\r\n|\r|\n/.exec(buf);
        if (!m) break;
        // A lone CR at the end of the buffer may be the first half of a CRLF.
        if (!done && m[0] === '\r' && m.index === buf.length - 1) break;
        const line = buf.slice(0, m.index);
        buf = buf.slice(m.index + m[0].length);
        if (line === '') {
          if (data.length > 0) yield { id, event: event || 'message', data: data.join('\n') };
          data = [];
          event = '';
          id = undefined;
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? '' : line.slice(colon + 1);
        if (val.startsWith(' ')) val = val.slice(1);
        if (field === 'data') data.push(val);
        else if (field === 'event') event = val;
        else if (field === 'id' && !val.includes('\0')) id = val;
      }
      // An event not ended by a blank line when the stream ends is dropped.
      if (done) return;
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => {});
  }
}
