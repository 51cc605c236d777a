// What a scheduler that posts nothing and serves nothing carries (issue 52, docs/benchmarks.md's
// idle RSS): no node:crypto, TLS, HTTP or perf_hooks — together ≈ 3 MB of its memory — through
// start-up and a fire. A module that brings one of them back in fails here, not in a benchmark.

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventually, startCli } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';

describe('scheduler footprint', () => {
  it('an idle scheduler, through start-up and a fire, loads no crypto, tls, http(s) or perf_hooks', async () => {
    const project = testProject({
      routines: [{ id: 'tick', schedule: '* * * * * *', action: 'command', run: 'true' }],
    });
    const seen = join(project, 'modules.json');
    const preload = join(project, 'preload.cjs');
    // the process writes the builtins it has loaded, every 100 ms (whole: a temp file renamed)
    writeFileSync(
      preload,
      `const fs = require('node:fs');
setInterval(() => {
  fs.writeFileSync(${JSON.stringify(`${seen}.tmp`)}, JSON.stringify(process.moduleLoadList));
  fs.renameSync(${JSON.stringify(`${seen}.tmp`)}, ${JSON.stringify(seen)});
}, 100).unref();
`,
    );
    const s = startCli(['scheduler', 'start'], { cwd: project, env: { NODE_OPTIONS: `--require ${preload}` } });
    try {
      await s.waitFor(/\[routine\] succeeded tick/);
      const at = Date.now();
      // a list written after the fire
      let loaded: string[] = [];
      await eventually(
        () => {
          if (!existsSync(seen)) return false;
          loaded = JSON.parse(readFileSync(seen, 'utf8')) as string[];
          return Date.now() - at > 300;
        },
        10_000,
        'module list written',
      );
      const builtins = loaded.filter((m) => m.startsWith('NativeModule ')).map((m) => m.slice(13));
      // the list is real: the modules a fire needs are in it
      expect(builtins).toContain('child_process');
      expect(builtins).toContain('fs');
      for (const heavy of ['crypto', 'tls', 'https', 'http', 'perf_hooks']) expect(builtins).not.toContain(heavy);
    } finally {
      s.child.kill('SIGTERM');
      await s.exited;
    }
  });
});
