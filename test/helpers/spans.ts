// Work spans that test jobs append to a marks file (`<id> start|end <epoch ms>` lines), read back
// as intervals per id: what ran beside what. A file not written yet holds no spans.

import { readFileSync } from 'node:fs';

export interface Span {
  s: number;
  /** Infinity while the job still runs. */
  e: number;
}

export function spansOf(file: string): Map<string, Span[]> {
  const out = new Map<string, Span[]>();
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return out;
  }
  for (const line of text.trim().split('\n').filter(Boolean)) {
    const [id, kind, t] = line.split(' ');
    const list = out.get(id!) ?? [];
    if (kind === 'start') list.push({ s: Number(t), e: Infinity });
    else list.at(-1)!.e = Number(t);
    out.set(id!, list);
  }
  return out;
}

/** How many spans of `a` overlap one of `b`. */
export const overlapping = (a: Span[], b: Span[]): number =>
  a.filter((x) => b.some((y) => x.s < y.e && y.s < x.e)).length;
