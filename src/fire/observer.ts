// What a scheduler tells an observer (the HTTP server's metrics and health, SPEC §11), kept
// apart from the firing code: the scheduler only calls these, never depends on what they do.

import type { Fire } from '../state/routine-state.js';

export interface SchedulerObserver {
  /** A fire was recorded (or its recording failed): once per fire, with its real result. */
  fired?(routineId: string, fire: Fire): void;
  /** The loop goes to sleep for `sleepMs` and means to be back by then: a loop that is not back
   * well after that has stalled (/healthz). */
  sleeping?(sleepMs: number): void;
}
