// A lock's slots as the config says them now (docs/lock.md "Lowering a lock's slots"): a waiter
// asks before each attempt, so a count changed while it waits counts at once — lowered, it never
// takes a slot above the new count; raised, it waits on the new slots too. One `stat` of the
// config file a look; the config is read again only when the file changed, and a config that no
// longer reads or validates keeps the count last read (the command that started says nothing
// more: the next command with it says what is wrong).

import { statExact } from '../fs/look.js';

/** The count a wait starts from, and the count now. */
export interface SlotCount {
  first: number;
  current(): Promise<number>;
}

/** `read`: the lock's slots from the config as it is now (throws when it does not validate). */
export function liveSlots(configPath: string, first: number, read: () => Promise<number> | number): SlotCount {
  const identity = (): string | null => {
    const st = statExact(configPath);
    return st ? `${st.ino}:${st.size}:${st.mtimeNs}` : null;
  };
  let seen = identity();
  let count = first;
  // a read under way answers every look until it is done (the waits on each slot ask at once:
  // one that found the file changed must not let another go on with the old count meanwhile)
  let reading: Promise<number> | null = null;
  return {
    first,
    current: async () => {
      if (reading) return reading;
      const now = identity();
      if (now === seen || now === null) return count;
      seen = now;
      reading = (async () => {
        try {
          count = await read();
        } catch {
          // invalid now (an edit half made, a typo): the count last read stands
        }
        return count;
      })().finally(() => (reading = null));
      return reading;
    },
  };
}

/** A count that does not change (the exec lock; a caller without a config file). */
export const fixedSlots = (n: number): SlotCount => ({ first: n, current: async () => n });
