import { mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';

/** A real temporary folder, removed when the test finishes (concurrent tests pass their own
 * context's `onTestFinished`). */
export function testdir(prefix = 'routinely-', onFinished: (fn: () => void) => void = onTestFinished): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), prefix)));
  onFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A project folder with a routinely.json. */
export function testProject(config: object = {}, onFinished?: (fn: () => void) => void): string {
  const dir = testdir('routinely-project-', onFinished);
  writeFileSync(join(dir, 'routinely.json'), JSON.stringify(config, null, 2));
  return dir;
}
