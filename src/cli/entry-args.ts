// Which command lines the entry (main.ts) runs without commander: `routine list` with `--json`,
// `--check` and the global `--config`, `validate`, `lock run` and `lock status` with their
// common flags; anything else is commander's to parse (and to refuse). No imports: this runs
// before anything is loaded.

export interface ListArgs {
  json: boolean;
  check: boolean;
  config?: string;
}

export function listArgs(args: readonly string[]): ListArgs | null {
  const out: ListArgs = { json: false, check: false };
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

/** `lock run [--if-busy MODE] [--wait-timeout S] -- CMD…` and `lock status [--json] [--key K]`,
 * with the global `--config`; anything else is the full path's to parse (and to refuse). */
export type LockArgs =
  | { kind: 'run'; ifBusy?: 'fail' | 'skip' | 'wait'; waitTimeout?: number; cmd: string[]; config?: string }
  | { kind: 'status'; json: boolean; key: string; config?: string };

export function lockArgs(args: readonly string[]): LockArgs | null {
  if (args[0] !== 'lock' || (args[1] !== 'run' && args[1] !== 'status')) return null;
  let config: string | undefined;
  let ifBusy: 'fail' | 'skip' | 'wait' | undefined;
  let waitTimeout: number | undefined;
  let json = false;
  let key = 'exec-run';
  let keyGiven = false;
  for (let i = 2; i < args.length; i++) {
    const a = args[i]!;
    const value = (): string | null => {
      const v = args[++i];
      return v === undefined || v.startsWith('-') ? null : v;
    };
    if (a === '--') {
      // --wait-timeout without --if-busy wait is the full path's to refuse
      if (args[1] !== 'run' || i + 1 >= args.length || (waitTimeout !== undefined && ifBusy !== 'wait')) return null;
      return { kind: 'run', ifBusy, waitTimeout, cmd: args.slice(i + 1), config };
    }
    if (a === '-c' || a === '--config') {
      const v = value();
      if (v === null) return null;
      config = v;
    } else if (args[1] === 'run' && a === '--if-busy') {
      const v = value();
      // (given twice: the full path's to refuse)
      if ((v !== 'fail' && v !== 'skip' && v !== 'wait') || ifBusy !== undefined) return null;
      ifBusy = v;
    } else if (args[1] === 'run' && a === '--wait-timeout') {
      const v = value();
      // as program.ts's seconds(): a plain number, at most 2 000 000
      if (v === null || !/^\d+(\.\d+)?$/.test(v.trim()) || Number(v) > 2_000_000 || waitTimeout !== undefined)
        return null;
      waitTimeout = Number(v);
    } else if (args[1] === 'status' && a === '--json') json = true;
    else if (args[1] === 'status' && a === '--key') {
      const v = value();
      if ((v !== 'exec-run' && v !== 'scheduler') || keyGiven) return null;
      key = v;
      keyGiven = true;
    } else return null;
  }
  return args[1] === 'status' ? { kind: 'status', json, key, config } : null;
}

/** `validate` with the global `--config`. */
export function validateArgs(args: readonly string[]): { config?: string } | null {
  if (args[0] !== 'validate') return null;
  if (args.length === 1) return {};
  if (args.length === 3 && (args[1] === '-c' || args[1] === '--config') && !args[2]!.startsWith('-'))
    return { config: args[2] };
  return null;
}
