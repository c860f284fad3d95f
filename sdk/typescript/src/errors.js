// Errors of the Stepwise HTTP API: every refusal is an RFC 9457 problem
// (docs/http_api.md, "Errors"); StepwiseError carries its fields.

/** A problem answered by the server, or a transport failure (status 0). */
export class StepwiseError extends Error {
  /**
   * @param {{status?: number, code?: string, title?: string, detail?: string, cause?: unknown}} p
   */
  constructor({ status = 0, code = 'transport', title = '', detail = '', cause } = {}) {
    super(`stepwise: ${detail || title || code}`, cause === undefined ? undefined : { cause });
    this.name = 'StepwiseError';
    this.status = status;
    this.code = code;
    this.title = title;
    this.detail = detail;
  }

  /** Whether a retry of the same request may succeed (5xx, 429, transport). */
  get retryable() {
    return this.status === 0 || this.status === 429 || this.status >= 500;
  }
}

/**
 * Turns a non-2xx response into a StepwiseError, reading its problem body.
 * @param {Response} res
 */
export async function errorOf(res) {
  let body = {};
  const text = await res.text().catch(() => '');
  try {
    body = text ? JSON.parse(text) : {};
  } catch {
    body = { detail: text.slice(0, 500) };
  }
  return new StepwiseError({
    status: res.status,
    code: body.code || `http_${res.status}`,
    title: body.title || res.statusText,
    detail: body.detail || '',
  });
}

/** A failed or cancelled run, as the step-by-step loop reports it. */
export class RunError extends Error {
  /** @param {{message: string, cause?: string, retry_count?: number, recoverable?: boolean}} e */
  constructor(e) {
    super(e.cause && e.cause !== e.message ? `stepwise: ${e.message}: ${e.cause}` : `stepwise: ${e.message}`);
    this.name = 'RunError';
    this.runCause = e.cause || '';
    this.retryCount = e.retry_count || 0;
    this.recoverable = !!e.recoverable;
  }
}
