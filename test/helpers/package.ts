// The package as users get it, made once per test run: a copy of the checkout's tracked files (a
// fresh clone: no dist/), `npm pack` there (prepack builds dist/), and the tarball installed into a
// new project. The first test file that asks for it makes it, in a folder the global setup names
// (and removes at the end); any other waits for it (pack.test.ts, samples.test.ts). A run that
// needs no package makes none. Dependencies come from the npm registry or the local npm cache.

import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { inject } from 'vitest';

export interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** What the run made (result.json in its folder). */
export interface Packed {
  /** The copy of the checkout (our node_modules linked in), kept for the run. */
  clone: string;
  /** Whether the copy had a dist/ before `npm pack` (it must not). */
  distBefore: boolean;
  pack: Ran;
  /** The tarball, once packed. */
  tarball: string | null;
  /** The project the tarball was installed into (`npm install <tarball>`). */
  project: string;
  install: Ran | null;
  /** Why it could not be made (an exception of ours, not a command's failure). */
  error: string | null;
}

/** Our environment for npm, without what an outer `npm test` told its scripts (npm_config_local_prefix
 * and friends would point the inner npm at this repository). Registry settings stay. */
export function npmEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', npm_config_update_notifier: 'false' };
  for (const k of Object.keys(env)) {
    if (
      k === 'INIT_CWD' ||
      (/^npm_/i.test(k) && !/^npm_config_(cache|registry|userconfig|globalconfig|update_notifier)$/i.test(k))
    )
      delete env[k];
  }
  return env;
}

function run(cmd: string, args: string[], cwd: string, timeoutMs: number): Promise<Ran> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd, env: npmEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (err) => (stderr += `${err.message}\n`));
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** What a fresh clone holds: the files git tracks (plus new ones not ignored), no dist/; our
 * node_modules linked in (the clone's `npm ci`, for the build). */
function freshClone(root: string, clone: string): void {
  const files = spawnSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], {
    cwd: root,
    encoding: 'utf8',
  });
  if (files.status !== 0) throw new Error(`git ls-files: ${files.stderr}`);
  for (const f of files.stdout.split('\0')) {
    if (!f || f === 'node_modules' || !existsSync(join(root, f))) continue;
    mkdirSync(dirname(join(clone, f)), { recursive: true });
    cpSync(join(root, f), join(clone, f));
  }
  symlinkSync(join(root, 'node_modules'), join(clone, 'node_modules'));
}

/** Makes the package in `dir` (never throws: what went wrong is in the result). */
async function makePackage(root: string, dir: string): Promise<void> {
  const clone = join(dir, 'clone');
  const packs = join(dir, 'packs');
  const project = join(dir, 'user');
  const out: Packed = {
    clone,
    distBefore: false,
    pack: { code: null, signal: null, stdout: '', stderr: '' },
    tarball: null,
    project,
    install: null,
    error: null,
  };
  try {
    mkdirSync(clone);
    mkdirSync(packs);
    mkdirSync(project);
    freshClone(root, clone);
    out.distBefore = existsSync(join(clone, 'dist'));
    out.pack = await run('npm', ['pack', '--json', '--pack-destination', packs], clone, 600_000);
    if (out.pack.code === 0) {
      const [info] = JSON.parse(out.pack.stdout.slice(out.pack.stdout.indexOf('['))) as { filename: string }[];
      out.tarball = join(packs, info!.filename);
      writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'routinely-user', private: true }));
      out.install = await run('npm', ['install', '--no-audit', '--no-fund', out.tarball], project, 600_000);
    }
  } catch (err) {
    out.error = (err as Error).stack ?? String(err);
  }
  writeFileSync(join(dir, 'result.json.tmp'), JSON.stringify(out));
  renameSync(join(dir, 'result.json.tmp'), join(dir, 'result.json'));
}

/** The package of this run: made by the first caller (of any test file), waited for by the
 * others. `root`: the checkout. */
export async function packedPackage(root: string, limitMs = 900_000): Promise<Packed> {
  const dir = inject('packageDir');
  const file = join(dir, 'result.json');
  let mine = true;
  try {
    mkdirSync(join(dir, 'making'));
  } catch {
    mine = false; // another test file makes it
  }
  if (mine) await makePackage(root, dir);
  const deadline = Date.now() + limitMs;
  while (!existsSync(file)) {
    if (Date.now() > deadline) throw new Error(`the package was not made within ${limitMs / 1000}s (${file})`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const packed = JSON.parse(readFileSync(file, 'utf8')) as Packed;
  if (packed.error) throw new Error(`the package could not be made: ${packed.error}`);
  return packed;
}

/** A new project of the test's own with the installed package copied in (node_modules/routinely)
 * and @types/node linked, as a user's project has them. */
export function userProjectWith(packed: Packed, dir: string, root: string): void {
  cpSync(join(packed.project, 'node_modules', 'routinely'), join(dir, 'node_modules', 'routinely'), {
    recursive: true,
  });
  mkdirSync(join(dir, 'node_modules', '@types'), { recursive: true });
  symlinkSync(join(root, 'node_modules', '@types', 'node'), join(dir, 'node_modules', '@types', 'node'));
}

export function removePackage(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}
