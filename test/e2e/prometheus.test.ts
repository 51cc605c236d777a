// Real Prometheus tooling (promtool, Debian's `prometheus` package): the shipped alert rules
// check and pass their own unit tests, and a live scrape after a failure, a busy skip, a pause
// and a reload that removes a routine passes `promtool check metrics` with the series of SPEC §11.

import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventually, runCli, sleep, startCli } from '../helpers/cli.js';
import { httpGet, sample } from '../helpers/http.js';
import { freePort } from '../helpers/pg-topology.js';
import { testdir, testProject } from '../helpers/testdir.js';

const havePromtool = spawnSync('promtool', ['--version']).status === 0;
const EXAMPLES = resolve(import.meta.dirname, '../../examples/prometheus');

describe.skipIf(!havePromtool && process.env.CI !== 'true')('Prometheus (promtool)', () => {
  it('the shipped alert rules: promtool check rules and promtool test rules', () => {
    expect(havePromtool, "promtool is required (CI installs Debian's prometheus)").toBe(true);
    const check = spawnSync('promtool', ['check', 'rules', 'alerts.yml'], { cwd: EXAMPLES, encoding: 'utf8' });
    expect(check.status, check.stdout + check.stderr).toBe(0);
    const test = spawnSync('promtool', ['test', 'rules', 'alerts.test.yml'], { cwd: EXAMPLES, encoding: 'utf8' });
    expect(test.status, test.stdout + test.stderr).toBe(0);
    expect(test.stdout).toMatch(/SUCCESS/);
  });

  it("docs/http.md shows exactly the shipped rules (each alert's expression and for)", () => {
    const rules = (text: string): Record<string, string> => {
      const out: Record<string, string> = {};
      let name: string | null = null;
      let block = false;
      let indent = 0;
      for (const line of text.split('\n')) {
        const alert = /^(\s*)- alert: (\w+)/.exec(line);
        if (alert) {
          name = alert[2]!;
          indent = alert[1]!.length;
          out[name] = '';
          block = false;
          continue;
        }
        if (name === null) continue;
        const lead = line.length - line.trimStart().length;
        const key = /^\s*(expr|for): ?(.*?)\s*(#.*)?$/.exec(line);
        if (key && lead === indent + 2) {
          block = key[2] === '|';
          out[name] += ` ${key[1]}: ${block ? '' : key[2]}`;
        } else if (block && lead > indent + 2 && line.trim() !== '') out[name] += ` ${line.trim()}`;
        else if (line.trim() === '' || lead <= indent + 2) block = false;
      }
      for (const k of Object.keys(out)) out[k] = out[k]!.replace(/\s+/g, ' ').trim();
      return out;
    };
    const shipped = rules(readFileSync(join(EXAMPLES, 'alerts.yml'), 'utf8'));
    const documented = rules(
      readFileSync(resolve(EXAMPLES, '../../docs/http.md'), 'utf8')
        .split('### Alert rules')[1]!
        .split('Prometheus scrape config')[0]!,
    );
    expect(Object.keys(shipped).length).toBeGreaterThanOrEqual(6);
    expect(documented).toEqual(shipped);
  });

  it(
    'a live scrape after a failure, a busy skip, a pause and a reload: the series of SPEC §11, promtool check metrics clean',
    { timeout: 90_000 },
    async () => {
      expect(havePromtool, "promtool is required (CI installs Debian's prometheus)").toBe(true);
      const routines = [
        { id: 'bad', schedule: '* * * * * *', action: 'command', run: 'exit 3' },
        { id: 'ok', schedule: '* * * * * *', action: 'command', run: 'true' },
        { id: 'gone', schedule: '0 0 1 1 *', action: 'command', run: 'true', exclusive: false },
        {
          id: 'slow',
          schedule: '0 0 1 1 *',
          action: 'command',
          run: 'echo started; while [ ! -e go ]; do sleep 0.05; done',
          ifBusy: 'wait',
        },
      ];
      const project = testProject({ routines });
      const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0'], { cwd: project, timeoutMs: 85_000 });
      const url = (await s.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
      await s.waitFor(/\[routine\] failed bad/);
      // the first scrape already has every per-routine series, unset times 0
      let m = (await httpGet(`${url}metrics`)).body;
      expect(sample(m, 'routinely_last_success_timestamp_seconds', { routine: 'gone' })).toBe(0);
      expect(sample(m, 'routinely_next_fire_timestamp_seconds', { routine: 'gone' })).toBeGreaterThan(
        Date.now() / 1000,
      );
      expect(sample(m, 'routinely_routine_failing', { routine: 'bad' })).toBe(1);
      expect(sample(m, 'routinely_routine_failing', { routine: 'ok' })).toBe(0);
      expect(m).toMatch(/^routinely_info\{version="[^"]+",project="[^"]+",host="[^"]+"\} 1$/m);
      // a busy skip (the holder waits its turn: at a tick the scheduler's routines queue for the
      // lock one behind the other, and a newcomer that would not wait is busy then)
      const holder = startCli(['lock', 'run', '--if-busy', 'wait', '--', 'sh', '-c', 'echo holding; sleep 4'], {
        cwd: project,
      });
      await holder.waitFor(/holding/);
      await s.waitFor(/\[routine\] skipped ok: exec busy/);
      // paused while the lock is held: its last fire is that skip
      expect((await runCli(['routine', 'pause', 'ok', '--note', 'maintenance'], { cwd: project })).code).toBe(0);
      await holder.exited;
      // a fire of another process, running now
      const slow = startCli(['routine', 'run', 'slow'], { cwd: project });
      await slow.waitFor(/started/);
      // (views of the state are shared for up to a second between scrapes): scraped until they
      // show the pause and the fire running
      await eventually(
        async () => {
          m = (await httpGet(`${url}metrics`)).body;
          return (
            sample(m, 'routinely_routine_paused', { routine: 'ok' }) === 1 &&
            sample(m, 'routinely_routine_running', { routine: 'slow' }) === 1
          );
        },
        15_000,
        'the pause and the running fire in /metrics',
        () => m,
      );
      expect(sample(m, 'routinely_skips_total', { routine: 'ok', reason: 'exec_busy' })).toBeGreaterThanOrEqual(1);
      // a tick while its own fire still goes (a loaded machine can stretch a fire of `true` past a
      // second) is counted apart, as the log says it — never a busy skip counted as one (the log,
      // read after the scrape, may have one more)
      expect(sample(m, 'routinely_skips_total', { routine: 'ok', reason: 'previous_run' })).toBeLessThanOrEqual(
        (s.stdout().match(/\[routine\] skipped ok: previous run still running/g) ?? []).length,
      );
      // the CronJob counterparts, against the records as `routine list` and `routine history` read them
      const list = JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project })).stdout) as {
        id: string;
        last_result: string;
        last_scheduled_at: string;
        running_since: string | null;
        timezone: string | null;
      }[];
      const ok = list.find((r) => r.id === 'ok')!;
      expect(ok.last_result).toBe('skipped');
      expect(list.find((r) => r.id === 'slow')!.running_since).not.toBeNull();
      expect(sample(m, 'routinely_routine_running', { routine: 'slow' })).toBe(1);
      expect(sample(m, 'routinely_routine_running', { routine: 'ok' })).toBe(0);
      expect(sample(m, 'routinely_last_schedule_timestamp_seconds', { routine: 'ok' })).toBe(
        Date.parse(ok.last_scheduled_at) / 1000,
      );
      // the last duration against the history: routine-state.json, which /metrics reads, may be a
      // moment behind the history on a loaded machine (docs/benchmarks.md: its lag), so scraped until it agrees
      let ranSeconds = NaN;
      await eventually(
        async () => {
          const history = JSON.parse(
            (await runCli(['routine', 'history', 'ok', '--json'], { cwd: project })).stdout,
          ) as { result: string; scheduled_at: string; started_at: string; finished_at: string }[];
          const ran = history
            .filter((e) => e.result !== 'skipped')
            .sort((a, b) => a.scheduled_at.localeCompare(b.scheduled_at))
            .at(-1)!;
          ranSeconds = (Date.parse(ran.finished_at) - Date.parse(ran.started_at)) / 1000;
          m = (await httpGet(`${url}metrics`)).body;
          return Math.abs(sample(m, 'routinely_last_duration_seconds', { routine: 'ok' })! - ranSeconds) < 0.0005;
        },
        15_000,
        "ok's last duration in /metrics as its history says",
        () => m,
      );
      expect(sample(m, 'routinely_last_duration_seconds', { routine: 'gone' })).toBe(0);
      expect(m).toMatch(
        /^routinely_routine_info\{routine="ok",schedule="\* \* \* \* \* \*",timezone="[^"]+",action="command",exclusive="true",if_busy="skip",lock="exec"\} 1$/m,
      );
      expect(m).toMatch(
        /^routinely_routine_info\{routine="slow",schedule="0 0 1 1 \*",timezone="[^"]+",action="command",exclusive="true",if_busy="wait",lock="exec"\} 1$/m,
      );
      expect(m).toMatch(
        /^routinely_routine_info\{routine="gone",schedule="0 0 1 1 \*",timezone="[^"]+",action="command",exclusive="false",if_busy="skip",lock="none"\} 1$/m,
      );
      writeFileSync(join(project, 'go'), '');
      expect((await slow.exited).code).toBe(0);
      expect(sample(m, 'routinely_routine_paused', { routine: 'ok' })).toBe(1);
      expect(sample(m, 'routinely_consecutive_failures', { routine: 'bad' })).toBeGreaterThanOrEqual(1);
      expect(sample(m, 'routinely_last_failure_timestamp_seconds', { routine: 'bad' })).toBeGreaterThan(0);
      expect(sample(m, 'routinely_fire_duration_seconds_bucket', { routine: 'bad', le: '0.005' })).toBeDefined();
      const check = spawnSync('promtool', ['check', 'metrics'], { input: m, encoding: 'utf8' });
      expect(check.status, check.stdout + check.stderr).toBe(0);
      // a reload that removes a routine: all of its series go
      writeFileSync(
        join(project, 'routinely.json'),
        JSON.stringify({ routines: routines.filter((r) => r.id !== 'gone') }),
      );
      await s.waitFor(/\[scheduler\] reloaded config \(3 routines: removed gone\)/);
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
    },
  );

  it(
    'the shipped rules in a Prometheus server on the real clock, scraping a scheduler: a first failure is "failing", never "no success for 26 h"; the scheduler SIGKILLed, it stays alerted; its target removed, SchedulerGone',
    { timeout: 150_000 },
    async () => {
      expect(
        spawnSync('prometheus', ['--version']).status,
        "prometheus is required (CI installs Debian's prometheus)",
      ).toBe(0);
      const project = testProject({
        routines: [
          { id: 'bad', schedule: '* * * * * *', action: 'command', run: 'exit 3' },
          { id: 'ok', schedule: '* * * * * *', action: 'command', run: 'true', exclusive: false },
        ],
      });
      const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0'], { cwd: project, timeoutMs: 140_000 });
      const target = new URL((await s.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!).host;
      const dir = testdir();
      const targets = join(dir, 'targets.json');
      writeFileSync(targets, JSON.stringify([{ targets: [target] }]));
      writeFileSync(
        join(dir, 'prometheus.yml'),
        [
          'global: { scrape_interval: 1s, evaluation_interval: 1s }',
          `rule_files: [${JSON.stringify(join(EXAMPLES, 'alerts.yml'))}]`,
          'scrape_configs:',
          '  - job_name: routinely',
          `    file_sd_configs: [{ files: [${JSON.stringify(targets)}], refresh_interval: 1s }]`,
        ].join('\n'),
      );
      mkdirSync(join(dir, 'data'));
      const port = await freePort();
      const prom = spawn(
        'prometheus',
        [
          `--config.file=${join(dir, 'prometheus.yml')}`,
          `--storage.tsdb.path=${join(dir, 'data')}`,
          `--web.listen-address=127.0.0.1:${port}`,
        ],
        { stdio: 'ignore' },
      );
      const killProm = (): void => {
        if (prom.exitCode === null) prom.kill('SIGKILL');
      };
      try {
        type Alert = { labels: Record<string, string>; state: 'pending' | 'firing' };
        const alerts = async (): Promise<Alert[]> => {
          try {
            return (
              JSON.parse((await httpGet(`http://127.0.0.1:${port}/api/v1/alerts`)).body) as {
                data: { alerts: Alert[] };
              }
            ).data.alerts;
          } catch {
            return []; // not up yet
          }
        };
        const until = async (what: string, ok: (a: Alert[]) => boolean, limitMs = 30_000): Promise<Alert[]> => {
          const deadline = Date.now() + limitMs;
          for (;;) {
            const a = await alerts();
            if (ok(a)) return a;
            if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}: ${JSON.stringify(a)}`);
            await sleep(250);
          }
        };
        const is =
          (name: string, state: Alert['state'], label: Record<string, string> = {}) =>
          (a: Alert[]): boolean =>
            a.some(
              (x) =>
                x.labels.alertname === name &&
                x.state === state &&
                Object.entries(label).every(([k, v]) => x.labels[k] === v),
            );
        await until('bad failing', is('RoutinelyRoutineFailing', 'firing', { routine: 'bad' }));
        // ten more evaluations on the real clock: a routine that never succeeded is not "26 h without success"
        await sleep(10_000);
        let now = await alerts();
        expect(
          now.filter((x) => x.labels.alertname === 'RoutinelyNoRecentSuccess'),
          JSON.stringify(now),
        ).toEqual([]);
        expect(
          now.filter((x) => x.labels.alertname === 'RoutinelyRoutineFailing').map((x) => x.labels.routine),
        ).toEqual(['bad']);
        // the scheduler dies: its series go stale, the failing routine stays alerted
        s.child.kill('SIGKILL');
        await until('SchedulerDown pending', is('RoutinelySchedulerDown', 'pending'));
        await sleep(5000);
        now = await alerts();
        expect(is('RoutinelyRoutineFailing', 'firing', { routine: 'bad' })(now), JSON.stringify(now)).toBe(true);
        // its target removed from discovery: no `up` at all
        writeFileSync(targets, '[]');
        now = await until('SchedulerGone pending', is('RoutinelySchedulerGone', 'pending', { instance: target }));
        expect(is('RoutinelyRoutineFailing', 'firing', { routine: 'bad' })(now), JSON.stringify(now)).toBe(true);
        expect(
          now.some((x) => x.labels.alertname === 'RoutinelySchedulerDown'),
          'no up, no SchedulerDown',
        ).toBe(false);
      } finally {
        killProm();
      }
    },
  );
});
