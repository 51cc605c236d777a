import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { anySignal, ManualClock } from '../src/clock.js';

describe('anySignal', () => {
  it('aborts when any source aborts, with its reason', () => {
    const a = new AbortController();
    const b = new AbortController();
    const link = anySignal(a.signal, b.signal);
    expect(link.signal.aborted).toBe(false);
    b.abort('stop');
    expect(link.signal.aborted).toBe(true);
    expect(link.signal.reason).toBe('stop');
  });

  it('takes its listeners off a long-lived source once unlinked (no growth per sleep)', () => {
    const halt = new AbortController();
    for (let i = 0; i < 50; i++) {
      const link = anySignal(new AbortController().signal, halt.signal);
      link.unlink();
    }
    expect(getEventListeners(halt.signal, 'abort')).toHaveLength(0);
  });

  it('is aborted at once when a source already is', () => {
    const a = new AbortController();
    a.abort('early');
    expect(anySignal(a.signal).signal.reason).toBe('early');
  });
});

describe('ManualClock.sleep', () => {
  it('leaves no listener on the signal once the sleep ends', async () => {
    const clock = new ManualClock();
    const halt = new AbortController();
    const slept = clock.sleep(10, halt.signal);
    clock.advance(10);
    await slept;
    expect(getEventListeners(halt.signal, 'abort')).toHaveLength(0);
  });
});
