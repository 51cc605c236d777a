import { mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';

/** A real temporary folder, removed when the test finishes. */
export function testdir(prefix = 'routinely-'): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), prefix)));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A project folder with a routinely.json. */
export function testProject(config: object = {}): string {
  const dir = testdir('routinely-project-');
  writeFileSync(join(dir, 'routinely.json'), JSON.stringify(config, null, 2));
  return dir;
}
