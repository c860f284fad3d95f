// The type declarations compile under tsc --strict with a program that
// uses the whole API, and refuse its misuse (@ts-expect-error lines).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');

test('the .d.ts files type-check a program using the API', (t) => {
  if (!existsSync(tsc)) {
    const how = 'run npm ci --prefix sdk/typescript (typescript is a pinned devDependency)';
    if (process.env.STEPWISE_REQUIRE_NPM === '1') assert.fail(`STEPWISE_REQUIRE_NPM=1 but typescript is not installed: ${how}`);
    t.skip(how);
    return;
  }
  try {
    execFileSync(process.execPath, [tsc, '-p', path.join(root, 'test', 'tsconfig.json')], { encoding: 'utf8' });
  } catch (err) {
    assert.fail(`tsc:\n${err.stdout}${err.stderr}`);
  }
});
