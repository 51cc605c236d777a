// The processes a test run started, found again however the run ended (test/global-setup.ts,
// scripts/suite-reaper.mjs). Every process a test starts inherits one environment variable that
// names the run: this checkout and the vitest process that ran it (pid and start time). Servers,
// schedulers, browsers, the commands they start in their own process groups or sessions (pg_ctl
// puts PostgreSQL in one of its own): a group kill misses some of these, the variable does not.
// A process that replaces its environment on purpose (`env -i`) is not found: no test does that.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname } from 'node:path';

export const SUITE_VAR = 'VITEST_ROUTINELY_RUN';

/** Field 22 of /proc/PID/stat (clock ticks since boot), or null when there is no such process. */
export function startTimeOf(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] === 'Z' || fields[0] === 'X') return null;
    return fields[19] ?? null;
  } catch {
    return null;
  }
}

/** The run's name: `<checkout>:<pid>:<start time>` of the process that runs the tests. */
export function runTag(root, pid = process.pid) {
  const checkout = createHash('sha1').update(root).digest('hex').slice(0, 12);
  return `${checkout}:${pid}:${startTimeOf(pid)}`;
}

/** Whether the run that `tag` names is still going (its vitest process lives). */
export function runAlive(tag) {
  const [, pid, start] = tag.split(':');
  return startTimeOf(Number(pid)) === start;
}

const checkoutOf = (tag) => tag.split(':')[0];

/** Processes whose environment names a run that `match(tag)` accepts, except `exclude`. */
export function processesOf(match, exclude = [process.pid]) {
  const found = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || exclude.includes(Number(name))) continue;
    let env;
    try {
      env = readFileSync(`/proc/${name}/environ`, 'latin1');
    } catch {
      continue; // gone, or not ours to read
    }
    const at = env.indexOf(`${SUITE_VAR}=`);
    if (at !== 0 && (at < 0 || env[at - 1] !== '\0')) continue;
    const tag = env.slice(at + SUITE_VAR.length + 1).split('\0')[0];
    if (!match(tag)) continue;
    const start = startTimeOf(Number(name));
    if (start === null) continue;
    let cmdline = '';
    try {
      cmdline = readFileSync(`/proc/${name}/cmdline`, 'latin1').split('\0').join(' ').trim();
    } catch {
      // gone meanwhile
    }
    found.push({ pid: Number(name), start, tag, cmdline });
  }
  return found;
}

/** SIGKILLs every process `match` accepts (each only while it is still the process that was
 * found: same pid, same start time), until none is left, and removes the data folders of the
 * PostgreSQL servers among them (a server killed with its run left its folder in tmpdir).
 * Returns what it killed. */
export function sweep(match, exclude = [process.pid]) {
  const killed = [];
  for (let round = 0; round < 10; round++) {
    const left = processesOf(match, exclude);
    if (left.length === 0) break;
    for (const p of left) {
      // killed in an earlier round and not reaped yet (a zombie is still listed): said once
      if (killed.some((k) => k.pid === p.pid && k.start === p.start)) continue;
      if (startTimeOf(p.pid) !== p.start) continue;
      try {
        process.kill(p.pid, 'SIGKILL');
        killed.push(p);
      } catch {
        // exited meanwhile
      }
    }
  }
  for (const p of killed) {
    const dataDir = /\s-D\s+(\S+)/.exec(` ${p.cmdline}`)?.[1];
    if (dataDir && dirname(dataDir) === tmpdir() && /^routinely-pg-/.test(basename(dataDir)))
      rmSync(dataDir, { recursive: true, force: true });
  }
  return killed;
}

/** Processes of earlier runs of this checkout whose vitest process is gone: a run cut short by
 * SIGKILL (the reaper is killed with it only by a kill of everything). */
export function sweepEarlierRuns(tag) {
  return sweep((t) => checkoutOf(t) === checkoutOf(tag) && t !== tag && !runAlive(t));
}
