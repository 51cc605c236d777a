// Which command lines the fast `routine list` may answer (main.ts): `routine list` with
// `--json`, `--check` and the global `--config`, in any order, and nothing else. No imports:
// this runs before anything is loaded.

export interface FastListArgs {
  json: boolean;
  check: boolean;
  config?: string;
}

export function fastListArgs(args: readonly string[]): FastListArgs | null {
  const out: FastListArgs = { json: false, check: false };
  const words: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--json') out.json = true;
    else if (a === '--check') out.check = true;
    else if (a === '-c' || a === '--config') {
      const v = args[++i];
      if (v === undefined || v.startsWith('-')) return null;
      out.config = v;
    } else if (a.startsWith('--config=')) out.config = a.slice('--config='.length);
    else if (a.startsWith('-')) return null;
    else words.push(a);
  }
  return words.length === 2 && words[0] === 'routine' && words[1] === 'list' ? out : null;
}
