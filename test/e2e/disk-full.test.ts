// A full disk under the state folder (SPEC §3, §7): a 512 KiB tmpfs filled so that 0 to 3 pages
// are left, then every writer — routine run (history, routine-state.json, its log), exec run
// (lock, registry, run snapshot, journal, task logs) — is run. Each either succeeds or exits 74
// naming the file; no state file is ever truncated or unparsable, no temp file stays, and once
// space is freed nothing that succeeded runs again and every recorded fire is counted.
// Needs root (mount); skipped otherwise, except under CI=true where it must run.

import { spawnSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { readChecksummed } from '../../src/checksum.js';
import { describe, expect, it, onTestFinished } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';

const isRoot = process.getuid?.() === 0;
const canMount = isRoot && spawnSync('mount', ['--version']).status === 0;

/** Every file under `dir`, recursively. */
function files(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...files(p));
    else out.push(p);
  }
  return out;
}

/** Fills the file system at `mnt` completely, then frees `pages` pages. */
function fill(mnt: string, pages: number): void {
  const filler = join(mnt, 'filler');
  const fd = openSync(filler, 'w');
  const block = Buffer.alloc(4096, 1);
  try {
    for (;;) writeSync(fd, block);
  } catch {
    // ENOSPC: full
  } finally {
    closeSync(fd);
  }
  const size = statSync(filler).size;
  spawnSync('truncate', ['-s', String(Math.max(0, size - pages * 4096)), filler]);
}

/** No state file is torn: JSON files parse, journals and histories have no torn line. */
function checkIntact(state: string): void {
  for (const f of files(state)) {
    const name = f.split('/').pop()!;
    expect(name, `leftover temp file ${f}`).not.toMatch(/\.tmp-[0-9a-f]{16}$/);
    if (name.endsWith('.json') && !f.includes('/locks/')) {
      expect(() => JSON.parse(readFileSync(f, 'utf8')), `${f} must parse`).not.toThrow();
    }
    // an append cut short by the full disk is written over with spaces by its writer at once
    // (docs/state.md): every line of a history or a run journal parses, or is blank
    if (name.endsWith('.jsonl')) {
      for (const line of readFileSync(f, 'utf8').split('\n'))
        if (line.trim() !== '')
          expect(() => JSON.parse(line), `${f}: a torn line ${JSON.stringify(line)}`).not.toThrow();
    }
    // a routine's own index is a cache rewritten in place: torn, it reads as missing (its
    // checksum), never as something else
    if (name.endsWith('.index')) {
      const text = readChecksummed(readFileSync(f, 'utf8'));
      if (text !== null) expect(() => JSON.parse(text), `${f} must parse`).not.toThrow();
    }
  }
}

describe.skipIf(!canMount && process.env.CI !== 'true')('a full disk under the state folder (SPEC §3)', () => {
  it.each([0, 1, 2, 3])(
    'with %i pages left: every writer succeeds or exits 74 naming the file; nothing is torn, lost or run twice',
    async (pages) => {
      expect(canMount, 'this test needs root and mount (CI runs as root)').toBe(true);
      const project = testProject({
        routines: Array.from({ length: 12 }, (_, i) => ({
          id: `r${i}`,
          schedule: '0 0 1 1 *',
          action: 'command',
          run: 'echo fired',
        })),
        exec: { tasks: Array.from({ length: 16 }, (_, i) => ({ id: `t${i}`, run: `echo t${i} >> starts` })) },
      });
      const mnt = join(project, 'mnt');
      mkdirSync(mnt);
      expect(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=512k,mode=0700', 'tmpfs', mnt]).status).toBe(0);
      onTestFinished(() => {
        spawnSync('umount', ['-l', mnt]);
      });
      const state = join(mnt, 'state');
      const env = { ROUTINELY_STATE_DIR: state };
      const cli = (args: string[]) => runCli(args, { cwd: project, env });
      for (let i = 0; i < 12; i++) expect((await cli(['routine', 'run', `r${i}`])).code).toBe(0);
      expect((await cli(['exec', 'run', 't0', 't1', 't2', 't3'])).code).toBe(0);

      fill(mnt, pages);
      const outcomes: string[] = [];
      for (const args of [['routine', 'run', 'r2'], ['exec', 'run'], ['routine', 'pause', 'r3'], ['register']]) {
        const r = await cli(args);
        outcomes.push(`${args.join(' ')}: ${r.code}`);
        expect([0, 1, 74], `${args.join(' ')}: ${r.stderr}`).toContain(r.code);
        if (r.code === 74)
          expect(r.stderr, args.join(' ')).toMatch(
            /(no space left on device|input\/output error) (writing|appending to|creating|creating the lock in) \S+/,
          );
        expect(r.stderr).not.toMatch(/unexpected error|    at /);
        checkIntact(state);
      }

      rmSync(join(mnt, 'filler'));
      // Space again: the state reads whole, what was recorded is counted, and nothing that
      // succeeded runs again.
      const list = await cli(['routine', 'list', '--json']);
      expect(list.code, list.stderr).toBe(0);
      const rows = JSON.parse(list.stdout) as { id: string; counts: { success: number } }[];
      for (const row of rows) expect(row.counts.success, row.id).toBeGreaterThanOrEqual(1);
      const history = await cli(['routine', 'history', 'r2', '--json']);
      expect((JSON.parse(history.stdout) as unknown[]).length).toBe(rows.find((r) => r.id === 'r2')!.counts.success);
      const run = await cli(['exec', 'run']);
      expect([0, 1], run.stderr).toContain(run.code);
      const again = await cli(['exec', 'run']);
      expect(again.stdout, outcomes.join('; ')).toMatch(/nothing to run/);
      const startLines = readFileSync(join(project, 'starts'), 'utf8').trim().split('\n');
      const counts = new Map<string, number>();
      for (const l of startLines) counts.set(l, (counts.get(l) ?? 0) + 1);
      // t0..t3 succeeded before the disk filled: they never started again
      for (const t of ['t0', 't1', 't2', 't3'])
        expect(counts.get(t), `${t} ran again (${outcomes.join('; ')})`).toBe(1);
      // and every task ran (`again` found nothing to run: each has succeeded once)
      expect([...counts.keys()].sort()).toEqual(Array.from({ length: 16 }, (_, i) => `t${i}`).sort());
      checkIntact(state);
      // each routine's own index (routine-state.json is the scheduler's, none ran here)
      expect(existsSync(join(state, 'history', 'r2.index'))).toBe(true);
    },
  );

  // (a fault pass: the run journal's append was the one append not repaired; a registry of 80
  // tasks takes 8 pages to rewrite, so the journal is what fills the disk with 11 or more left)
  it.each([11, 13, 15])(
    'with %i pages left as exec run goes: its journal append cut short is written over with spaces, and the run resumes once there is space',
    async (pages) => {
      expect(canMount, 'this test needs root and mount (CI runs as root)').toBe(true);
      const project = testProject({
        exec: { parallel: 1, tasks: Array.from({ length: 80 }, (_, i) => ({ id: `t${i}`, run: 'true' })) },
      });
      const mnt = join(project, 'mnt');
      mkdirSync(mnt);
      expect(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1m,mode=0700', 'tmpfs', mnt]).status).toBe(0);
      onTestFinished(() => {
        spawnSync('umount', ['-l', mnt]);
      });
      const state = join(mnt, 'state');
      const cli = (args: string[]) => runCli(args, { cwd: project, env: { ROUTINELY_STATE_DIR: state } });
      expect((await cli(['register'])).code).toBe(0);
      fill(mnt, pages);
      const run = await cli(['exec', 'run']);
      expect([1, 74], run.stderr).toContain(run.code);
      expect(run.stderr).toMatch(/no space left on device/);
      checkIntact(state);
      rmSync(join(mnt, 'filler'));
      const resumed = await cli(['exec', 'resume']);
      expect(resumed.code, resumed.stderr).toBe(0);
      expect(resumed.stderr).not.toMatch(/torn or corrupt/);
      const status = JSON.parse((await cli(['exec', 'status', '--json'])).stdout) as { status: string }[];
      expect(status.filter((t) => t.status !== 'succeeded')).toEqual([]);
    },
  );
});
