// Real Prometheus tooling (promtool, Debian's `prometheus` package): the shipped alert rules
// check and pass their own unit tests, and a live scrape after a failure, a busy skip, a pause
// and a reload that removes a routine passes `promtool check metrics` with the series of SPEC §11.

import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, startCli } from '../helpers/cli.js';
import { httpGet, sample } from '../helpers/http.js';
import { testProject } from '../helpers/testdir.js';

const havePromtool = spawnSync('promtool', ['--version']).status === 0;
const EXAMPLES = resolve(import.meta.dirname, '../../examples/prometheus');

describe.skipIf(!havePromtool && process.env.CI !== 'true')('Prometheus (promtool)', () => {
  it('the shipped alert rules: promtool check rules and promtool test rules', () => {
    expect(havePromtool, 'promtool is required (CI installs Debian\'s prometheus)').toBe(true);
    const check = spawnSync('promtool', ['check', 'rules', 'alerts.yml'], { cwd: EXAMPLES, encoding: 'utf8' });
    expect(check.status, check.stdout + check.stderr).toBe(0);
    const test = spawnSync('promtool', ['test', 'rules', 'alerts.test.yml'], { cwd: EXAMPLES, encoding: 'utf8' });
    expect(test.status, test.stdout + test.stderr).toBe(0);
    expect(test.stdout).toMatch(/SUCCESS/);
  });

  it('a live scrape after a failure, a busy skip, a pause and a reload: the series of SPEC §11, promtool check metrics clean', { timeout: 90_000 }, async () => {
    expect(havePromtool, 'promtool is required (CI installs Debian\'s prometheus)').toBe(true);
    const routines = [
      { id: 'bad', schedule: '* * * * * *', action: 'command', run: 'exit 3' },
      { id: 'ok', schedule: '* * * * * *', action: 'command', run: 'true' },
      { id: 'gone', schedule: '0 0 1 1 *', action: 'command', run: 'true' },
    ];
    const project = testProject({ routines });
    const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0'], { cwd: project, timeoutMs: 85_000 });
    const url = (await s.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
    await s.waitFor(/\[routine\] failed bad/);
    // the first scrape already has every per-routine series, unset times 0
    let m = (await httpGet(`${url}metrics`)).body;
    expect(sample(m, 'routinely_last_success_timestamp_seconds', { routine: 'gone' })).toBe(0);
    expect(sample(m, 'routinely_next_fire_timestamp_seconds', { routine: 'gone' })).toBeGreaterThan(Date.now() / 1000);
    expect(sample(m, 'routinely_routine_failing', { routine: 'bad' })).toBe(1);
    expect(sample(m, 'routinely_routine_failing', { routine: 'ok' })).toBe(0);
    expect(m).toMatch(/^routinely_info\{version="[^"]+",project="[^"]+",host="[^"]+"\} 1$/m);
    // a busy skip
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo holding; sleep 4'], { cwd: project });
    await holder.waitFor(/holding/);
    await s.waitFor(/\[routine\] skipped ok: exec busy/);
    await holder.exited;
    expect((await runCli(['routine', 'pause', 'ok', '--note', 'maintenance'], { cwd: project })).code).toBe(0);
    m = (await httpGet(`${url}metrics`)).body;
    expect(sample(m, 'routinely_skips_total', { routine: 'ok', reason: 'exec busy' })).toBeGreaterThanOrEqual(1);
    expect(sample(m, 'routinely_skips_total', { routine: 'ok', reason: 'previous run' })).toBe(0);
    expect(sample(m, 'routinely_routine_paused', { routine: 'ok' })).toBe(1);
    expect(sample(m, 'routinely_consecutive_failures', { routine: 'bad' })).toBeGreaterThanOrEqual(1);
    expect(sample(m, 'routinely_last_failure_timestamp_seconds', { routine: 'bad' })).toBeGreaterThan(0);
    expect(sample(m, 'routinely_fire_duration_seconds_bucket', { routine: 'bad', le: '0.005' })).toBeDefined();
    const check = spawnSync('promtool', ['check', 'metrics'], { input: m, encoding: 'utf8' });
    expect(check.status, check.stdout + check.stderr).toBe(0);
    // a reload that removes a routine: all of its series go
    writeFileSync(join(project, 'routinely.json'), JSON.stringify({ routines: routines.filter((r) => r.id !== 'gone') }));
    await s.waitFor(/\[scheduler\] reloaded config \(2 routines\)/);
    // (views of the state are shared for up to a second between scrapes and page loads)
    const deadline = Date.now() + 10_000;
    do {
      await new Promise((r) => setTimeout(r, 300));
      m = (await httpGet(`${url}metrics`)).body;
    } while (/routine="gone"/.test(m) && Date.now() < deadline);
    expect(m).not.toMatch(/routine="gone"/);
    expect(m).toMatch(/routine="ok"/);
    // stopping: up 0 at once
    s.child.kill('SIGTERM');
    await s.exited;
  });
});
