// `routinely completion bash|zsh|fish` (SPEC §10): a completion script made from the command
// tree itself, so it never lists a command or an option that is not there. Commands, options,
// the values of options with choices, and routine ids (from `routinely routine list --json`, in
// the project of the current folder) after the routine commands that take one.

import type { Command, Option } from 'commander';
import { shellQuote } from '../shell-quote.js';

interface Node {
  /** the words from the top: '' for routinely itself, 'lock run', … */
  path: string;
  description: string;
  subcommands: string[];
  options: { flags: string[]; choices: string[]; takesValue: boolean; description: string }[];
  takesRoutine: boolean;
}

/** Commands whose first argument is a routine id. */
const ROUTINE_ID = new Set([
  'routine run',
  'routine history',
  'routine logs',
  'routine pause',
  'routine stop',
  'routine resume',
]);

function nodes(program: Command): Node[] {
  const all: Node[] = [];
  const walk = (c: Command, path: string): void => {
    const visible = c.commands.filter((s) => !(s as Command & { _hidden?: boolean })._hidden);
    const opts = (c.options as Option[]).filter((o) => !o.hidden);
    all.push({
      path,
      description: c.description(),
      subcommands: visible.map((s) => s.name()),
      options: [
        ...opts.map((o) => ({
          flags: [o.long, o.short].filter((f): f is string => typeof f === 'string'),
          choices: o.argChoices ?? [],
          takesValue: o.required || o.optional,
          description: o.description,
        })),
        { flags: ['--help', '-h'], choices: [], takesValue: false, description: 'show help' },
        ...(path !== ''
          ? [{ flags: ['--config', '-c'], choices: [], takesValue: true, description: 'config file' }]
          : []),
      ],
      takesRoutine: ROUTINE_ID.has(path),
    });
    for (const s of visible) walk(s, path ? `${path} ${s.name()}` : s.name());
  };
  walk(program, '');
  return all;
}

const ROUTINE_IDS = `routinely routine list --json 2>/dev/null | sed -n 's/^    "id": "\\([^"]*\\)",$/\\1/p'`;

export function completionScript(shell: string, program: Command): string {
  const tree = nodes(program);
  if (shell === 'bash') return bash(tree);
  if (shell === 'zsh') return zsh(tree);
  return fish(tree);
}

function bash(tree: Node[]): string {
  const lines = [
    '# routinely completion for bash: eval "$(routinely completion bash)" in ~/.bashrc',
    '_routinely() {',
    '  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} node="" i w words',
    '  for ((i = 1; i < COMP_CWORD; i++)); do',
    '    w=${COMP_WORDS[i]}',
    '    case "$node|$w" in',
    ...tree.flatMap((n) =>
      n.subcommands.map(
        (s) => `      ${shellQuote(`${n.path}|${s}`)}) node=${shellQuote(n.path ? `${n.path} ${s}` : s)} ;;`,
      ),
    ),
    '    esac',
    '  done',
    '  case "$node|$prev" in',
    ...tree.flatMap((n) =>
      n.options
        .filter((o) => o.takesValue)
        .map((o) => {
          const pattern = o.flags.map((f) => shellQuote(`${n.path}|${f}`)).join('|');
          return o.choices.length > 0
            ? `    ${pattern}) COMPREPLY=($(compgen -W ${shellQuote(o.choices.join(' '))} -- "$cur")); return ;;`
            : `    ${pattern}) COMPREPLY=($(compgen -f -- "$cur")); return ;;`;
        }),
    ),
    '  esac',
    '  case "$node" in',
    ...tree.map((n) => {
      const ids = n.takesRoutine ? ` $(${ROUTINE_IDS})` : '';
      return `    ${shellQuote(n.path)}) words="${[...n.subcommands, ...n.options.flatMap((o) => o.flags)].join(' ')}${ids}" ;;`;
    }),
    '  esac',
    '  COMPREPLY=($(compgen -W "$words" -- "$cur"))',
    '}',
    'complete -F _routinely routinely',
    '',
  ];
  return lines.join('\n');
}

function zsh(tree: Node[]): string {
  return [
    '# routinely completion for zsh: eval "$(routinely completion zsh)" in ~/.zshrc (after compinit)',
    'autoload -U +X bashcompinit && bashcompinit',
    bash(tree).split('\n').slice(1).join('\n'),
  ].join('\n');
}

function fish(tree: Node[]): string {
  const esc = (s: string): string => s.replace(/\\/g, '\\\\').replace(/'/g, "\\'");
  const lines = [
    '# routinely completion for fish: routinely completion fish > ~/.config/fish/completions/routinely.fish',
    'complete -c routinely -f',
  ];
  for (const n of tree) {
    const words = n.path === '' ? [] : n.path.split(' ');
    // in this node: every word of its path given, and none of its subcommands yet
    const at = [
      ...(words.length === 0 ? ['__fish_use_subcommand'] : words.map((w) => `__fish_seen_subcommand_from ${w}`)),
      ...(n.subcommands.length > 0 && words.length > 0
        ? [`not __fish_seen_subcommand_from ${n.subcommands.join(' ')}`]
        : []),
    ].join('; and ');
    const inside = words.length === 0 ? '' : words.map((w) => `__fish_seen_subcommand_from ${w}`).join('; and ');
    for (const s of n.subcommands) {
      const child = tree.find((c) => c.path === (n.path ? `${n.path} ${s}` : s));
      lines.push(
        `complete -c routinely -n '${at}' -a ${s} -d '${esc(child?.description.split(/[:;(]/)[0]!.trim() ?? '')}'`,
      );
    }
    if (n.subcommands.length > 0 && words.length > 0) continue; // a group: its options are its commands'
    for (const o of n.options) {
      const long = o.flags.find((f) => f.startsWith('--'))?.slice(2);
      const short = o.flags.find((f) => /^-[^-]$/.test(f))?.slice(1);
      const parts = ['complete -c routinely'];
      if (inside) parts.push(`-n '${inside}'`);
      else parts.push(`-n '__fish_use_subcommand'`);
      if (long) parts.push(`-l ${long}`);
      if (short) parts.push(`-s ${short}`);
      if (o.choices.length > 0) parts.push(`-xa '${o.choices.join(' ')}'`);
      else if (o.takesValue) parts.push('-r');
      parts.push(`-d '${esc(o.description.split(/[:;(]/)[0]!.trim())}'`);
      lines.push(parts.join(' '));
    }
    if (n.takesRoutine) lines.push(`complete -c routinely -n '${inside}' -xa '(${ROUTINE_IDS.replace(/'/g, "\\'")})'`);
  }
  return `${lines.join('\n')}\n`;
}
