// SIGINT / SIGTERM / SIGHUP / SIGQUIT handling for commands that hold a lock: the first signal stops the
// work (forwarded to the child's process group), the lock is released, and the command exits
// 128 + signal number (SPEC §4.9, §7). A second signal escalates to SIGKILL of the children.
// SIGQUIT (Ctrl-\) too: the command is in a process group of its own, so the terminal's signal
// reaches only us, and Node's default would leave the command running and the lock stale.

const HANDLED = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'] as const;
type Handled = (typeof HANDLED)[number];
const EXIT: Record<Handled, number> = { SIGHUP: 129, SIGINT: 130, SIGQUIT: 131, SIGTERM: 143 };

export class StopSignals implements Disposable {
  private readonly controller = new AbortController();
  private readonly listeners = new Set<(signal: Handled, repeated: boolean) => void>();
  received: Handled | null = null;

  private readonly handler = (signal: Handled): void => {
    const repeated = this.received !== null;
    this.received ??= signal;
    this.controller.abort(signal);
    for (const l of this.listeners) l(signal, repeated);
  };

  constructor() {
    for (const s of HANDLED) process.on(s, this.handler);
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get exitCode(): number {
    return this.received ? EXIT[this.received] : 0;
  }

  onSignal(listener: (signal: Handled, repeated: boolean) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  [Symbol.dispose](): void {
    for (const s of HANDLED) process.off(s, this.handler);
  }
}
