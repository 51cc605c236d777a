// Live progress of an exec run: on a TTY one status line redrawn in place (done/total, running
// tasks, elapsed) with a permanent line per finished task; otherwise plain lines, one per event.

import type { RunEvent, RunState } from '../exec/run-state.js';
import { humanDuration, paint, useColor } from './io.js';

export class Progress {
  private readonly tty = Boolean(process.stdout.isTTY);
  private readonly color = useColor();
  private timer: NodeJS.Timeout | undefined;
  private started = 0;
  private state: RunState | null = null;
  private drawn = false;

  /** `stateDir`: the state folder as the user should read it (for log paths). */
  constructor(private readonly stateDir: string) {}

  start(state: RunState): void {
    this.state = state;
    this.started = Date.now();
    const n = Object.keys(state.tasks).length;
    this.line(`run ${state.run_id}: ${n} task${n === 1 ? '' : 's'}${state.attempt > 1 ? ` (resume, attempt ${state.attempt})` : ''}`);
    if (this.tty) {
      this.timer = setInterval(() => this.draw(), 1000);
      this.timer.unref();
      this.draw();
    }
  }

  event(e: RunEvent, state: RunState): void {
    this.state = state;
    if (e.type === 'task-started') {
      if (!this.tty) this.line(`started ${e.task}`);
    } else if (e.type === 'task-finished') {
      const t = state.tasks[e.task];
      const took = e.duration_ms !== null ? ` in ${humanDuration(e.duration_ms)}` : '';
      const log = t ? `  (log: ${this.logPath(state.run_id, t.log)})` : '';
      switch (e.status) {
        case 'succeeded':
          this.line(`${paint('succeeded', 'green', this.color)} ${e.task}${took}`);
          break;
        case 'skipped_dependency':
          this.line(`${paint('skipped', 'yellow', this.color)} ${e.task}: ${e.why ?? 'dependency failed'}`);
          break;
        case 'interrupted':
          this.line(`${paint('interrupted', 'yellow', this.color)} ${e.task}${took}`);
          break;
        default:
          this.line(`${paint('failed', 'red', this.color)} ${e.task}: ${e.why ?? e.status}${took}${log}`);
      }
    }
    if (this.tty) this.draw();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.clear();
  }

  private logPath(runId: string, log: string): string {
    return `${this.stateDir}/exec/runs/${runId}/${log}`;
  }

  private line(text: string): void {
    this.clear();
    process.stdout.write(`${text}\n`);
    if (this.tty && this.timer) this.draw();
  }

  private clear(): void {
    if (this.drawn) process.stdout.write('\r\x1b[K');
    this.drawn = false;
  }

  private draw(): void {
    if (!this.state) return;
    const tasks = Object.entries(this.state.tasks);
    const done = tasks.filter(([, t]) => t.status !== 'pending' && t.status !== 'running').length;
    const running = tasks.filter(([, t]) => t.status === 'running').map(([id]) => id);
    const elapsed = humanDuration(Date.now() - this.started);
    let text = `[${done}/${tasks.length}] ${elapsed}${running.length ? `  running: ${running.join(', ')}` : ''}`;
    const width = process.stdout.columns ?? 80;
    if (text.length > width - 1) text = `${text.slice(0, width - 2)}…`;
    process.stdout.write(`\r\x1b[K${paint(text, 'cyan', this.color)}`);
    this.drawn = true;
  }
}
