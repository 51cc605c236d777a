import { describe, expect, it } from 'vitest';
import { blockedTasks, dependencyOrder, StartPlanner, tasksToStart, type PlanTask } from '../../src/exec/plan.js';
import type { TaskStatus } from '../../src/exec/registry.js';

const t = (id: string, dependsOn: string[] = [], provider = 'default'): PlanTask => ({ id, provider, dependsOn });
const status = (entries: Record<string, TaskStatus>) => new Map(Object.entries(entries));
const never = () => false;

describe('tasksToStart', () => {
  it('respects the overall cap and keeps definition order', () => {
    const tasks = [t('a'), t('b'), t('c')];
    expect(
      tasksToStart(tasks, status({ a: 'pending', b: 'pending', c: 'pending' }), never, { parallel: 2, providers: {} }),
    ).toEqual(['a', 'b']);
    expect(
      tasksToStart(tasks, status({ a: 'running', b: 'pending', c: 'pending' }), never, { parallel: 2, providers: {} }),
    ).toEqual(['b']);
  });

  it('respects per-provider caps while other providers use the free slots', () => {
    const tasks = [t('r1', [], 'agent'), t('r2', [], 'agent'), t('b1'), t('b2')];
    const caps = { parallel: 4, providers: { agent: { maxConcurrency: 1 } } };
    expect(
      tasksToStart(tasks, status({ r1: 'pending', r2: 'pending', b1: 'pending', b2: 'pending' }), never, caps),
    ).toEqual(['r1', 'b1', 'b2']);
    expect(
      tasksToStart(tasks, status({ r1: 'running', r2: 'pending', b1: 'succeeded', b2: 'running' }), never, caps),
    ).toEqual([]);
  });

  it('starts a task only when its dependencies succeeded, here or before the run', () => {
    const tasks = [t('build'), t('docs', ['build']), t('deploy', ['lint'])];
    const caps = { parallel: 4, providers: {} };
    expect(tasksToStart(tasks, status({ build: 'running', docs: 'pending', deploy: 'pending' }), never, caps)).toEqual(
      [],
    );
    expect(
      tasksToStart(
        tasks,
        status({ build: 'succeeded', docs: 'pending', deploy: 'pending' }),
        (id) => id === 'lint',
        caps,
      ),
    ).toEqual(['docs', 'deploy']);
  });
});

describe('blockedTasks', () => {
  it('skips the dependants of a failure transitively, not unrelated tasks', () => {
    const tasks = [t('a'), t('b', ['a']), t('c', ['b']), t('d')];
    const blocked = blockedTasks(tasks, status({ a: 'failed', b: 'pending', c: 'pending', d: 'pending' }), never);
    expect([...blocked]).toEqual([
      ['b', 'a'],
      ['c', 'b'],
    ]);
  });

  it('blocks a task whose dependency is outside the run and has not succeeded', () => {
    expect([...blockedTasks([t('docs', ['build'])], status({ docs: 'pending' }), never)]).toEqual([['docs', 'build']]);
    expect([...blockedTasks([t('docs', ['build'])], status({ docs: 'pending' }), () => true)]).toEqual([]);
  });
});

describe('dependencyOrder', () => {
  it('puts dependencies first and is otherwise stable', () => {
    expect(dependencyOrder([t('docs', ['build']), t('lint'), t('build')]).map((x) => x.id)).toEqual([
      'build',
      'docs',
      'lint',
    ]);
  });
});

describe('StartPlanner', () => {
  it('answers as tasksToStart at every step of a run, without looking at every task each time', () => {
    // a small deterministic generator: runs of 40 tasks with dependencies, two providers (one
    // capped), tasks finishing in a scrambled order, some failing
    let seed = 7;
    const rand = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let run = 0; run < 50; run++) {
      const tasks: PlanTask[] = Array.from({ length: 40 }, (_, i) => ({
        id: `t${i}`,
        provider: rand(3) === 0 ? 'db' : 'default',
        dependsOn: i > 0 && rand(4) === 0 ? [`t${rand(i)}`] : [],
      }));
      const caps = { parallel: 1 + rand(4), providers: { db: { maxConcurrency: 1 } } };
      const status = new Map<string, TaskStatus>(tasks.map((t) => [t.id, 'pending' as TaskStatus]));
      const doneBefore = (): boolean => false;
      const planner = new StartPlanner(tasks, status, doneBefore, caps);
      const running: string[] = [];
      for (let step = 0; step < 200; step++) {
        const expected = tasksToStart(tasks, status, doneBefore, caps);
        expect(planner.next()).toEqual(expected);
        for (const id of expected) {
          status.set(id, 'running');
          planner.started(id);
          running.push(id);
        }
        if (running.length === 0) {
          // nothing runs: the rest is blocked behind a failure; mark it so, as the executor does
          for (const id of blockedTasks(tasks, status, doneBefore).keys()) status.set(id, 'skipped_dependency');
          if (tasksToStart(tasks, status, doneBefore, caps).length === 0) break;
          continue;
        }
        const done = running.splice(rand(running.length), 1)[0]!;
        planner.finished(done);
        status.set(done, rand(5) === 0 ? 'failed' : 'succeeded');
        for (const id of blockedTasks(tasks, status, doneBefore).keys()) status.set(id, 'skipped_dependency');
      }
      expect([...status.values()].filter((v) => v === 'pending' || v === 'running')).toEqual([]);
    }
  });
});
