// Which files of /etc/cron.d Debian's cron skips whatever they hold (measured beside the daemon:
// `my.job`, `app.cron` and `bak~` never ran, a file of mode 664 was skipped as "INSECURE MODE"),
// so import-crontab says their jobs never ran under cron. Here in a folder standing for it.

import { chmodSync, linkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cronDSkips } from '../../src/cli/import-crontab-command.js';
import { importCrontab } from '../../src/config/crontab.js';
import { testdir } from '../helpers/testdir.js';

describe('import-crontab and the files of /etc/cron.d cron skips', () => {
  it('a name with a dot or a ~, a file its group may write, one with another hard link; none outside the folder', () => {
    const d = testdir();
    const file = (name: string, mode = 0o644): string => {
      const path = join(d, name);
      writeFileSync(path, '* * * * * root true\n');
      chmodSync(path, mode);
      return path;
    };
    const root = process.getuid?.() === 0;
    expect(cronDSkips(file('backup'), d)).toBe(root ? undefined : expect.stringMatching(/not owned by root/));
    for (const name of ['my.job', 'app.cron', 'bak~'])
      expect(cronDSkips(file(name), d)).toMatch(/holds a character other than a letter, a digit, _ or -/);
    expect(cronDSkips(file('groupw', 0o664), d)).toMatch(
      /its group or others may write it \(mode 664: cron's "INSECURE MODE"\)/,
    );
    if (root) {
      linkSync(file('linked'), join(testdir(), 'other'));
      expect(cronDSkips(join(d, 'linked'), d)).toMatch(/another hard link/);
    }
    // the same name elsewhere is no file of /etc/cron.d
    expect(cronDSkips(file('my.job'), join(d, 'sub'))).toBeUndefined();
  });

  it('the output and the notes say the whole file never ran under cron', () => {
    const r = importCrontab('* * * * * root ./a.sh\n', {
      source: '/etc/cron.d/my.job',
      system: true,
      cronSkips: 'its name "my.job" holds a character other than a letter, a digit, _ or -',
    });
    expect(r.routines).toBe(1);
    expect(r.notes).toEqual([
      expect.stringMatching(
        /^\/etc\/cron\.d\/my\.job: cron skips this whole file: its name "my\.job" .*, so none of its jobs ran under cron; the routines here are what it says, and they will run under routinely$/,
      ),
    ]);
    expect(r.text).toContain('// cron skips this whole file: its name "my.job"');
  });
});
