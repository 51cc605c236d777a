// The shape of src/ (issues 38, 51). The import graph (what `madge --circular` checks, without the
// download): every cycle of files, and every pair of folders that import each other, type
// imports included. Where SQL is written (a statement keyword in a file), and every call of a
// node:fs function outside src/fs. Prints them and exits 1 when there is a cycle; `node
// scripts/check-structure.mjs --json` for tests.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const root = resolve(dirname(new URL(import.meta.url).pathname), '..', 'src');
const IMPORT =
  /(?:^|\n)\s*(?:import|export)\s+(?:type\s+)?[^'"]*?from\s+['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)/g;
const SQL =
  /\b(SELECT|INSERT INTO|UPDATE [a-z_]+ SET|DELETE FROM|CREATE (TABLE|INDEX|FUNCTION|SEQUENCE)|ALTER (TABLE|SEQUENCE)|BEGIN|COMMIT|ROLLBACK|SET LOCAL)\b/;
const FS_IMPORT = /import\s*\{([^}]*)\}\s*from\s*['"]node:fs(?:\/promises)?['"]/g;
const graph = new Map();
const sqlFiles = [];
// a file's header (its leading comment lines) says what it is for in at most 10 lines (the design
// essays are in docs/design.md); a file over 300 lines says why in its header ("over 300 lines")
const longHeaders = [];
const bigUnexplained = [];
const folderFiles = {};
const fsCalls = [];
for (const f of readdirSync(root, { recursive: true })) {
  if (!f.endsWith('.ts')) continue;
  const path = join(root, f);
  const text = readFileSync(path, 'utf8');
  const deps = new Set();
  for (const m of text.matchAll(IMPORT))
    deps.add(relative(root, resolve(dirname(path), (m[1] ?? m[2]).replace(/\.js$/, '.ts'))));
  const name = relative(root, path);
  graph.set(name, deps);
  const lines = text.split('\n');
  const header = lines.slice(
    0,
    lines.findIndex((l) => !/^\s*\/\//.test(l)),
  );
  if (header.length > 10) longHeaders.push(`${name} (${header.length} lines)`);
  if (lines.length > 300 && !/over 300 lines/i.test(header.join(' ')))
    bigUnexplained.push(`${name} (${lines.length} lines)`);
  if (name.includes('/')) folderFiles[name.split('/')[0]] = (folderFiles[name.split('/')[0]] ?? 0) + 1;
  if (SQL.test(text)) sqlFiles.push(name);
  if (name.startsWith('fs/')) continue;
  // the functions imported from node:fs (types and `constants` are no calls), each call of one
  const fns = [...text.matchAll(FS_IMPORT)]
    .flatMap((m) => m[1].split(','))
    .map((n) => n.trim())
    .filter((n) => n && !n.startsWith('type ') && n !== 'constants');
  // node:fs reached any other way (a namespace, require, import()) is counted as a call
  const other = text.replace(FS_IMPORT, '').replace(/import\s+type\s*\{[^}]*\}\s*from\s*['"]node:fs['"]/g, '');
  if (/['"]node:fs(\/promises)?['"]|['"]fs['"]/.test(other)) fsCalls.push(`${name} (node:fs not by named import)`);
  text.split('\n').forEach((line, i) => {
    if (/^\s*(\/\/|\*)/.test(line)) return;
    for (const fn of fns) {
      const local = fn.split(/\s+as\s+/).at(-1);
      for (const _ of line.matchAll(new RegExp(`(?<![\\w.])${local}\\(`, 'g')))
        fsCalls.push(`${name}:${i + 1} ${local}`);
    }
  });
}
sqlFiles.sort();

// files: strongly connected components of more than one file (Tarjan)
const cycles = [];
const index = new Map();
const low = new Map();
const stack = [];
const onStack = new Set();
let next = 0;
const visit = (v) => {
  index.set(v, next);
  low.set(v, next++);
  stack.push(v);
  onStack.add(v);
  for (const w of graph.get(v) ?? []) {
    if (!graph.has(w)) continue;
    if (!index.has(w)) {
      visit(w);
      low.set(v, Math.min(low.get(v), low.get(w)));
    } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
  }
  if (low.get(v) !== index.get(v)) return;
  const component = [];
  let w;
  do {
    w = stack.pop();
    onStack.delete(w);
    component.push(w);
  } while (w !== v);
  if (component.length > 1) cycles.push(component.sort());
};
for (const v of graph.keys()) if (!index.has(v)) visit(v);

// folders (src/<folder>/…; files directly in src/ are shared modules, not a folder)
const folderOf = (f) => (f.includes('/') ? f.split('/')[0] : null);
const edges = new Map();
for (const [from, deps] of graph) {
  for (const to of deps) {
    const a = folderOf(from);
    const b = folderOf(to);
    if (a && b && a !== b) edges.set(`${a} -> ${b}`, [...(edges.get(`${a} -> ${b}`) ?? []), `${from} -> ${to}`]);
  }
}
const mutual = [...edges.keys()]
  .filter((k) => edges.has(k.split(' -> ').reverse().join(' -> ')))
  .sort()
  .map((k) => ({ folders: k, imports: edges.get(k) }));

if (process.argv.includes('--json')) {
  console.log(
    JSON.stringify({ files: graph.size, cycles, mutual, sqlFiles, fsCalls, longHeaders, bigUnexplained, folderFiles }),
  );
} else {
  for (const c of cycles) console.log(`cycle: ${c.join(' ')}`);
  for (const m of mutual) console.log(`folders import each other: ${m.folders}\n  ${m.imports.join('\n  ')}`);
  if (process.argv.includes('--fs')) for (const c of fsCalls) console.log(`fs call: ${c}`);
  for (const h of longHeaders) console.log(`header over 10 lines: ${h}`);
  for (const b of bigUnexplained) console.log(`over 300 lines, no reason in its header: ${b}`);
  console.log(
    `${graph.size} files: ${cycles.length} cycles, ${mutual.length / 2} pairs of folders importing each other; SQL in ${sqlFiles.join(', ')}; ${fsCalls.length} node:fs calls outside src/fs (--fs lists them)`,
  );
  process.exitCode = cycles.length + mutual.length + longHeaders.length + bigUnexplained.length > 0 ? 1 : 0;
}
