// The turns of a process's statement connections (connect.ts): a fire's way to its start
// (claims, the pause flag, open markers) goes before records waiting for the same connection, so
// a burst of 1 000 routines starts them all before recording the first ones (docs/postgres.md).

/** `size` holders at once; urgent askers go before the others; an asker gives up after
 * `timeoutMs` (the pool's own connect time-out, which it then no longer waits for). */
export class PriorityGate {
  private inside = 0;
  private readonly waiting: { urgent: boolean; go: (entered: boolean) => void }[] = [];

  constructor(private readonly size: number) {}

  enter(urgent: boolean, timeoutMs: number): Promise<boolean> {
    if (this.inside < this.size) {
      this.inside++;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const w = { urgent, go: (entered: boolean) => (clearTimeout(timer), resolve(entered)) };
      const timer = setTimeout(() => {
        const i = this.waiting.indexOf(w);
        if (i >= 0) this.waiting.splice(i, 1);
        resolve(false);
      }, timeoutMs);
      // urgent ones after the urgent ones waiting, before every other
      const at = urgent ? this.waiting.findIndex((x) => !x.urgent) : -1;
      if (at < 0) this.waiting.push(w);
      else this.waiting.splice(at, 0, w);
    });
  }

  leave(): void {
    const next = this.waiting.shift();
    if (next) next.go(true);
    else this.inside--;
  }
}
