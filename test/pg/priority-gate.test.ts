// The turns of the statement connections (src/pg/priority-gate.ts): urgent askers first, in
// their order; the others after, in theirs; an asker that waits too long gives up.
import { describe, expect, it } from 'vitest';
import { PriorityGate } from '../../src/pg/priority-gate.js';

describe('PriorityGate', () => {
  it('lets urgent askers in before the others, each kind in its order, and gives up after the time-out', async () => {
    const gate = new PriorityGate(1);
    expect(await gate.enter(false, 1000)).toBe(true);
    const order: string[] = [];
    const ask = (name: string, urgent: boolean): Promise<void> =>
      gate.enter(urgent, 5000).then((ok) => {
        order.push(`${name}:${ok}`);
        gate.leave();
      });
    const all = [ask('record1', false), ask('claim1', true), ask('record2', false), ask('claim2', true)];
    gate.leave();
    await Promise.all(all);
    expect(order).toEqual(['claim1:true', 'claim2:true', 'record1:true', 'record2:true']);
    // held, and nobody leaves: the asker gives up
    expect(await gate.enter(false, 10)).toBe(true);
    expect(await gate.enter(true, 20)).toBe(false);
    gate.leave();
    expect(await gate.enter(true, 20)).toBe(true);
  });
});
