// Updates test/durations.json (seconds per test file; files under 2 s left out): the order
// test/sequencer.ts starts files in on a fresh clone, which has no results cache. Takes the
// durations of the last run from vitest's results cache (or from a JSON report: `node
// scripts/test-durations.mjs report.json`, written by `--reporter=json --outputFile=…`); files the
// run did not include keep their figure, files that no longer exist are dropped. Run it after a
// full `npm test` on a quiet machine; a stale figure only makes a run slower, never changes a result.
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

/** [path relative to the checkout, ms] of the last run. */
function lastRun() {
  const report = process.argv[2];
  if (report) {
    const { testResults } = JSON.parse(readFileSync(report, 'utf8'));
    return testResults
      .filter((f) => f.status === 'passed')
      .map((f) => [relative(process.cwd(), f.name), f.endTime - f.startTime]);
  }
  const dir = 'node_modules/.vite/vitest';
  let newest = null;
  for (const d of existsSync(dir) ? readdirSync(dir) : []) {
    const f = join(dir, d, 'results.json');
    if (existsSync(f) && (!newest || statSync(f).mtimeMs > statSync(newest).mtimeMs)) newest = f;
  }
  if (!newest) {
    console.error(`no results cache under ${dir}: run npm test first`);
    process.exit(1);
  }
  const { results } = JSON.parse(readFileSync(newest, 'utf8'));
  return results.filter(([, r]) => !r.failed).map(([key, r]) => [key.slice(key.indexOf(':') + 1), r.duration]);
}

const file = 'test/durations.json';
const seconds = existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')).seconds : {};
const run = lastRun();
for (const [path, ms] of run) {
  if (ms >= 2000) seconds[path] = Math.round(ms / 1000);
  else delete seconds[path];
}
for (const path of Object.keys(seconds)) if (!existsSync(path)) delete seconds[path];
const sorted = Object.fromEntries(Object.entries(seconds).sort((a, b) => b[1] - a[1]));
writeFileSync(
  file,
  `${JSON.stringify({ about: 'seconds per test file on a quiet 2-core machine (test/sequencer.ts); npm run test:durations updates it', seconds: sorted }, null, 2)}\n`,
);
console.log(`${file}: ${run.length} files of the last run, ${Object.keys(sorted).length} listed`);
