// A real browser for the status page test: Debian's Chromium driven by playwright-core (no
// browser download). Without it the test is skipped locally, with the reason, and fails under
// CI=true, where `.ci/run` installs it.

import { existsSync } from 'node:fs';
import type { BrowserContext } from 'playwright-core';
import { onTestFinished } from 'vitest';
import { testdir } from './testdir.js';

export const CHROMIUM = process.env.ROUTINELY_CHROMIUM || '/usr/bin/chromium';

/** Flags that work on these machines: the closed network refuses Chromium's own background
 * connections, and root needs --no-sandbox. */
const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** Why the browser test cannot run here, or null when it can. Throws under CI. */
export function chromiumMissing(): string | null {
  if (existsSync(CHROMIUM)) return null;
  const why = `no Chromium at ${CHROMIUM} (Debian package "chromium"; .ci/run installs it)`;
  if (process.env.CI === 'true') throw new Error(`CI=true but ${why}`);
  return why;
}

/** A headless browser with a fresh profile, closed when the test finishes. */
export async function openBrowser(viewport = { width: 1280, height: 900 }): Promise<BrowserContext> {
  const { chromium } = await import('playwright-core');
  const context = await chromium.launchPersistentContext(testdir('routinely-chromium-'), { executablePath: CHROMIUM, headless: true, args: FLAGS, viewport });
  onTestFinished(() => context.close());
  return context;
}
