// Live progress of an exec run: on a TTY one status line redrawn in place (done/total, running
// tasks, elapsed) with a permanent line per finished task; otherwise plain lines, one per event.

import { eventLine, runHeader } from '../exec/run-lines.js';
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
    this.line(runHeader(state));
    if (this.tty) {
      this.timer = setInterval(() => this.draw(), 1000);
      this.timer.unref();
      this.draw();
    }
  }

  event(e: RunEvent, state: RunState): void {
    this.state = state;
    // on a TTY the status line shows what started; a line is kept for what finished
    if (!(this.tty && e.type === 'task-started')) {
      const text = eventLine(e, state, `${this.stateDir}/exec/runs/${state.run_id}`, (t, colour) =>
        paint(t, colour, this.color),
      );
      if (text !== null) this.line(text);
    }
    if (this.tty) this.draw();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.clear();
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
    // (a terminal that says 0 columns, as `stty cols 0` leaves it, is taken as 80)
    const width = process.stdout.columns || 80;
    if (text.length > width - 1) text = `${text.slice(0, width - 2)}…`;
    process.stdout.write(`\r\x1b[K${paint(text, 'cyan', this.color)}`);
    this.drawn = true;
  }
}
