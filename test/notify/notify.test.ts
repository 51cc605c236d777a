// notifyFire end to end over a real project, its real state (files, and PostgreSQL where the
// test cluster runs) and a real local HTTP server: the exact payload of a failure, a recovery,
// exactly one `starved` for three busy skips, none for ordinary skips, and a webhook that is
// down never throws and never changes what was recorded.

import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { disposable, openBackend, type Backend } from '../../src/backend.js';
import { loadProject, type Project } from '../../src/config/load.js';
import { notifyFire, type NotifyFireOptions } from '../../src/notify/notify.js';
import { formatText, type LogEvent } from '../../src/fire/log.js';
import type { Fire, RoutineResult } from '../../src/state/routine-state.js';
import { freshDatabase, pgCluster } from '../helpers/pg-test.js';
import { testProject } from '../helpers/testdir.js';
import { closedPort, webhookServer } from '../helpers/webhook-server.js';

const cluster = pgCluster();
const backends = cluster ? (['file', 'postgres'] as const) : (['file'] as const);
const fast = { attempts: 3, backoffMs: 10, timeoutMs: 5_000 };

let seq = 0;
function fire(result: RoutineResult, extra: Partial<Fire> = {}): Fire {
  const t = Date.UTC(2026, 10, 30, 12, 0, seq++);
  const at = new Date(t).toISOString();
  return {
    result,
    reason: result === 'failure' ? 'exit code 3' : result === 'skipped' ? 'exec busy' : null,
    scheduled_at: at,
    started_at: at,
    finished_at: new Date(t + 1500).toISOString(),
    duration_ms: 1500,
    exit_code: result === 'failure' ? 3 : result === 'success' ? 0 : null,
    run_id: result === 'skipped' ? null : `r-20261130T1200${String(seq).padStart(2, '0')}Z-ab12`,
    trigger: 'schedule',
    ...extra,
  };
}

async function setup(kind: 'file' | 'postgres', config: object) {
  const extra =
    kind === 'postgres'
      ? { project: 'app', backend: { type: 'postgres', url: await freshDatabase(cluster!) } }
      : { project: 'app' };
  const dir = testProject({ ...extra, ...config });
  const project = loadProject({ cwd: dir });
  const backend = disposable(await openBackend(project));
  const logged: LogEvent[] = [];
  /** Records a fire as the scheduler does (read the prior record, record, then notify). */
  const record = async (id: string, f: Fire, o: Partial<NotifyFireOptions> = {}) => {
    const prior = (await backend.routines.read(() => {})).routines[id];
    await backend.routines.recordFire(id, f, () => {});
    const def = project.config.routines.find((r) => r.id === id)!;
    return notifyFire({
      project,
      def,
      prior,
      fire: f,
      final: true,
      log: (e) => logged.push(e),
      host: 'build-01',
      delivery: fast,
      ...o,
    });
  };
  return { dir, project, backend, logged, record };
}

const routine = (id: string, extra: object = {}) => ({
  id,
  schedule: '0 0 1 1 *',
  action: 'command',
  run: 'true',
  ...extra,
});

describe.each(backends)('notifyFire (%s backend)', (kind) => {
  it('a failure notifies once with the payload of SPEC §10; a recovery notifies', async () => {
    const hook = await webhookServer([200]);
    const s = await setup(kind, { notify: { webhook: hook.url }, routines: [routine('backup')] });
    await using _b = s.backend as Backend & AsyncDisposable;
    await s.record('backup', fire('success'));
    const failed = fire('failure');
    await s.record('backup', failed);
    expect(hook.payloads()).toEqual([
      {
        event: 'failure',
        project: 'app',
        host: 'build-01',
        routine: 'backup',
        run_id: failed.run_id,
        result: 'failure',
        scheduled_at: failed.scheduled_at,
        finished_at: failed.finished_at,
        exit_code: 3,
        why: 'exit code 3',
        next: `routinely routine logs backup --run ${failed.run_id}`,
        log: join(s.project.stateDir, 'logs', 'backup.log'),
        // no output logged for that run (this test records fires that never ran): null
        output_tail: null,
        consecutive_failures: 1,
        consecutive_skips: 0,
      },
    ]);
    expect(Object.keys(hook.payloads()[0]!)).toEqual([
      'event',
      'project',
      'host',
      'routine',
      'run_id',
      'result',
      'scheduled_at',
      'finished_at',
      'exit_code',
      'why',
      'next',
      'log',
      'output_tail',
      'consecutive_failures',
      'consecutive_skips',
    ]);
    await s.record('backup', fire('failure'));
    const ok = fire('success');
    await s.record('backup', ok);
    await s.record('backup', fire('success'));
    expect(hook.payloads().map((p) => p.event)).toEqual(['failure', 'failure', 'recovery']);
    expect(hook.payloads()[2]).toMatchObject({
      event: 'recovery',
      result: 'success',
      run_id: ok.run_id,
      exit_code: 0,
      why: 'succeeded after 2 failed fires',
      consecutive_failures: 0,
    });
    expect(s.logged.map(formatText)).toEqual([
      `[notify] failure backup: sent to http://127.0.0.1:${hook.port}/…`,
      `[notify] failure backup: sent to http://127.0.0.1:${hook.port}/…`,
      `[notify] recovery backup: sent to http://127.0.0.1:${hook.port}/…`,
    ]);
  });

  it('three consecutive busy skips give exactly one starved; ordinary skips give none', async () => {
    const hook = await webhookServer([200]);
    const s = await setup(kind, {
      notify: { webhook: hook.url },
      routines: [routine('auto'), routine('slow', { starvedAfterSkips: 5 })],
    });
    await using _b = s.backend as Backend & AsyncDisposable;
    await s.record('auto', fire('success'));
    for (let i = 0; i < 2; i++) await s.record('auto', fire('skipped'));
    expect(hook.received).toHaveLength(0); // ordinary skips
    await s.record('auto', fire('skipped'));
    for (let i = 0; i < 4; i++) await s.record('auto', fire('skipped'));
    expect(hook.payloads()).toHaveLength(1);
    expect(hook.payloads()[0]).toMatchObject({
      event: 'starved',
      routine: 'auto',
      result: 'skipped',
      run_id: null,
      exit_code: null,
      consecutive_skips: 3,
      consecutive_failures: 0,
      why: 'skipped 3 times in a row: exec busy',
    });
    // a success resets the count: the next three skips starve it again
    await s.record('auto', fire('success'));
    for (let i = 0; i < 3; i++) await s.record('auto', fire('skipped'));
    expect(hook.payloads().map((p) => p.event)).toEqual(['starved', 'starved']);
    // starvedAfterSkips of the routine
    for (let i = 0; i < 4; i++) await s.record('slow', fire('skipped'));
    expect(hook.payloads()).toHaveLength(2);
    await s.record('slow', fire('skipped'));
    expect(hook.payloads().map((p) => [p.event, p.routine])).toEqual([
      ['starved', 'auto'],
      ['starved', 'auto'],
      ['starved', 'slow'],
    ]);
  });

  it('a webhook that is down never throws and never changes what was recorded', async () => {
    const port = await closedPort();
    const s = await setup(kind, {
      notify: { webhook: `http://user:pw@127.0.0.1:${port}/hook?token=t0k` },
      routines: [routine('tick')],
    });
    await using _b = s.backend as Backend & AsyncDisposable;
    const f = fire('failure');
    const outcomes = await s.record('tick', f);
    expect(outcomes).toMatchObject([{ event: 'failure', deliveries: [{ delivered: false, attempts: 3 }] }]);
    const [line] = s.logged.map(formatText);
    expect(line).toMatch(
      new RegExp(
        `^\\[notify\\] failure tick: webhook http://127\\.0\\.0\\.1:${port}/… failed after 3 attempts: .*ECONNREFUSED`,
      ),
    );
    expect(line).not.toMatch(/pw|t0k|user/);
    const rec = (await s.backend.routines.read(() => {})).routines.tick!;
    expect(rec).toMatchObject({
      last_result: 'failure',
      last_reason: 'exit code 3',
      consecutive_failures: 1,
      counts: { success: 0, failure: 1, skipped: 0 },
    });
    const history = await s.backend.routines.history('tick');
    expect(history.map((h) => h.result)).toEqual(['failure']);
  });

  it('a routine with notify false is silent; its own notify replaces the top level and its `on` filters', async () => {
    const top = await webhookServer([200]);
    const own = await webhookServer([200]);
    const s = await setup(kind, {
      notify: { webhook: top.url },
      routines: [
        routine('quiet', { notify: false }),
        routine('own', { notify: { webhook: own.url, on: ['recovery'] } }),
      ],
    });
    await using _b = s.backend as Backend & AsyncDisposable;
    await s.record('quiet', fire('failure'));
    await s.record('own', fire('failure'));
    await s.record('own', fire('success'));
    expect(top.received).toHaveLength(0);
    expect(own.payloads().map((p) => [p.event, p.routine])).toEqual([['recovery', 'own']]);
    expect(s.logged).toHaveLength(1);
  });

  it('a failed attempt that will be retried notifies nothing', async () => {
    const hook = await webhookServer([200]);
    const s = await setup(kind, {
      notify: { webhook: hook.url },
      routines: [routine('flaky', { retry: { attempts: 2, backoffSeconds: 1 } })],
    });
    await using _b = s.backend as Backend & AsyncDisposable;
    await s.record('flaky', fire('failure'), { final: false });
    await s.record('flaky', fire('success', { trigger: 'retry', attempt: 2 }));
    expect(hook.received).toHaveLength(0);
  });
});

describe('notifyFire', () => {
  it('without notify configured does nothing', async () => {
    const project = loadProject({ cwd: testProject({ routines: [routine('a')] }) });
    const logged: LogEvent[] = [];
    const out = await notifyFire({
      project,
      def: project.config.routines[0]!,
      prior: undefined,
      fire: fire('failure'),
      final: true,
      log: (e) => logged.push(e),
    });
    expect(out).toEqual([]);
    expect(logged).toEqual([]);
  });

  it('a logger that throws cannot make it throw', async () => {
    const hook = await webhookServer([200]);
    const project: Project = loadProject({
      cwd: testProject({ notify: { webhook: hook.url }, routines: [routine('a')] }),
    });
    await expect(
      notifyFire({
        project,
        def: project.config.routines[0]!,
        prior: undefined,
        fire: fire('failure'),
        final: true,
        delivery: fast,
        log: () => {
          throw new Error('stdout gone');
        },
      }),
    ).resolves.toEqual([]);
    expect(hook.received).toHaveLength(1);
  });

  it('a skip names the holder in why when the fire carries it; the command channel gets the same payload', async () => {
    const dir = testProject({
      notify: { command: 'cat >> events.jsonl' },
      routines: [routine('a', { starvedAfterSkips: 1 })],
    });
    const project = loadProject({ cwd: dir });
    const holder = {
      version: 1 as const,
      key: 'exec-run',
      lock_id: 'a'.repeat(32),
      generation: 7,
      created_at: Date.UTC(2026, 10, 30, 12, 1, 7) / 1000,
      heartbeat_at: 0,
      expires_at: 0,
      owner: {
        pid: 4711,
        host: 'build-01',
        boot_id: null,
        start_time: null,
        command: 'exec run',
        run_id: 'r-20261130T120107Z-7f3a',
      },
    };
    await notifyFire({
      project,
      def: project.config.routines[0]!,
      prior: undefined,
      fire: { ...fire('skipped'), holder },
      final: true,
      log: () => {},
      delivery: fast,
    });
    const { readFileSync } = await import('node:fs');
    const got = JSON.parse(readFileSync(join(dir, 'events.jsonl'), 'utf8')) as Record<string, unknown>;
    expect(got).toMatchObject({
      event: 'starved',
      why: 'skipped 1 time in a row: exec busy (held by exec run r-20261130T120107Z-7f3a since 12:01:07)',
    });
  });

  it('a failing command is logged without its command string; JSON lines carry the same fields', async () => {
    const project = loadProject({
      cwd: testProject({
        notify: { command: 'echo "TOKEN=abc"; echo "pager down" >&2; exit 4' },
        routines: [routine('a')],
      }),
    });
    const logged: LogEvent[] = [];
    await notifyFire({
      project,
      def: project.config.routines[0]!,
      prior: undefined,
      fire: fire('failure'),
      final: true,
      delivery: fast,
      log: (e) => logged.push(e),
    });
    expect(logged.map(formatText)).toEqual([
      '[notify] failure a: command failed after 3 attempts: exit code 4: pager down',
    ]);
    expect(logged[0]).toEqual({
      event: 'notify.failed',
      routine: 'a',
      notify_event: 'failure',
      channel: 'command',
      target: 'command',
      attempts: 3,
      error: 'exit code 4: pager down',
    });
  });
});
