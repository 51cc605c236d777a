// A lock's slots in the config as it is now, for a `lock run` that waits (lock/live-slots.ts):
// loaded only when the config file changed while it waited.

import { loadProject } from '../config/load.js';
import { slotsOf } from '../lock/named.js';

/** Throws when the config does not validate (the waiter keeps the count it had). */
export function configuredSlots(configPath: string, name: string): number {
  return slotsOf(loadProject({ configPath }).config.locks, name);
}
