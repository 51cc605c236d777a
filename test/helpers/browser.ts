/// <reference lib="dom" />
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
const FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Why the browser test cannot run here, or null when it can. Throws under CI. */
export function chromiumMissing(): string | null {
  if (existsSync(CHROMIUM)) return null;
  const why = `no Chromium at ${CHROMIUM} (Debian package "chromium"; .ci/run installs it)`;
  if (process.env.CI === 'true') throw new Error(`CI=true but ${why}`);
  return why;
}

/** A headless browser with a fresh profile, closed when the test finishes. */
export async function openBrowser(
  viewport = { width: 1280, height: 900 },
  javaScriptEnabled = true,
): Promise<BrowserContext> {
  const { chromium } = await import('playwright-core');
  const context = await chromium.launchPersistentContext(testdir('routinely-chromium-'), {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    viewport,
    javaScriptEnabled,
  });
  onTestFinished(() => context.close());
  return context;
}

export interface AxeFinding {
  id: string;
  impact: string | null;
  help: string;
  nodes: string[];
}

/** axe-core's violations on the page as it is now (the npm package's own script, evaluated
 * through the debugging protocol, so the page's CSP neither blocks it nor has to allow it). */
export async function axeViolations(page: import('playwright-core').Page): Promise<AxeFinding[]> {
  const { readFileSync } = await import('node:fs');
  const { createRequire } = await import('node:module');
  const source = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  await page.evaluate(source);
  return page.evaluate(async () => {
    const axe = (
      window as unknown as {
        axe: {
          run(
            ctx: Document,
            o: object,
          ): Promise<{
            violations: { id: string; impact: string | null; help: string; nodes: { target: unknown[] }[] }[];
          }>;
        };
      }
    ).axe;
    const r = await axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.slice(0, 5).map((n) => JSON.stringify(n.target)),
    }));
  });
}

/** axe in light and dark, at 1280 px and at phone width; the page is left at 1280 px, light. */
export async function axeEveryMode(page: import('playwright-core').Page): Promise<Record<string, AxeFinding[]>> {
  const found: Record<string, AxeFinding[]> = {};
  for (const [name, width, height] of [
    ['desktop', 1280, 900],
    ['phone', 390, 844],
  ] as const) {
    await page.setViewportSize({ width, height });
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      found[`${name} ${scheme}`] = await axeViolations(page);
    }
  }
  await page.emulateMedia({ colorScheme: 'light' });
  await page.setViewportSize({ width: 1280, height: 900 });
  return found;
}
