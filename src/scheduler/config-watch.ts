// Reload on change (SPEC §6): the scheduler reloads when its config file's content changes. The
// file is read with the same checks as at start-up (config/find.ts readConfigBytes): a FIFO, a
// device or a huge file swapped in is never read, so it can neither block the loop nor fill
// memory; the reload that follows refuses it and keeps the old config.

import type { FSWatcher } from 'node:fs';
import { watchFolder } from '../fs/names.js';
import { basename, dirname } from 'node:path';
import { configTextOf, readConfigBytes } from '../config/find.js';

export class ConfigWatch {
  private watcher: FSWatcher | undefined;
  private debounce: NodeJS.Timeout | undefined;
  /** The accepted file's text (compared whole: no hash, so node:crypto stays unloaded in the
   * scheduler, ≈ 1 MB of its memory); null when it could not be read. */
  private content: string | null = null;

  constructor(
    private readonly path: () => string,
    private readonly changed: () => void,
  ) {}

  /** The config now in force: the text that was validated (else the file's current content). */
  accepted(text?: string): void {
    this.content = text ?? this.read();
  }

  /** Editors replace the file by rename, so the folder is watched; a touch without a change
   * does not reload. */
  start(): void {
    const file = this.path();
    const name = basename(file);
    // undefined when no watch is available: SIGHUP still reloads
    this.watcher = watchFolder(dirname(file), (changed) => {
      if (changed !== null && changed !== name) return;
      clearTimeout(this.debounce);
      this.debounce = setTimeout(() => {
        if (this.read() !== this.content) this.changed();
      }, 150);
    });
  }

  stop(): void {
    this.watcher?.close();
    clearTimeout(this.debounce);
  }

  /** Null when the file cannot be read as a config (the reload then says why). */
  private read(): string | null {
    try {
      return configTextOf(readConfigBytes(this.path()));
    } catch {
      return null;
    }
  }
}
