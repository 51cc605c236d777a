// A shared checkout with a second local user as the attacker (SPEC §12, docs/security.md): a
// real user in a real group, real files. Root must never run what the other user chose.
// Needs root (useradd, chown); skipped otherwise, except under CI=true where it must run.

import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  lchownSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { runCli } from '../helpers/cli.js';

const isRoot = process.getuid?.() === 0;
const canAddUsers = isRoot && spawnSync('sh', ['-c', 'command -v useradd && command -v groupadd']).status === 0;

function attacker(): { user: string; uid: number; group: string; gid: number } {
  const tag = Math.random().toString(36).slice(2, 8);
  const group = `rtdevs${tag}`;
  const user = `rtatk${tag}`;
  expect(spawnSync('groupadd', [group]).status).toBe(0);
  expect(spawnSync('useradd', ['-M', '-N', '-g', group, '-s', '/bin/sh', user]).status).toBe(0);
  onTestFinished(() => {
    spawnSync('userdel', [user]);
    spawnSync('groupdel', [group]);
  });
  const uid = Number(spawnSync('id', ['-u', user], { encoding: 'utf8' }).stdout.trim());
  const gid = Number(spawnSync('getent', ['group', group], { encoding: 'utf8' }).stdout.split(':')[2]);
  return { user, uid, group, gid };
}

function sharedProject(gid: number): { root: string; project: string; pwned: string } {
  const root = mkdtempSync(join(tmpdir(), 'routinely-shared-'));
  onTestFinished(() => rmSync(root, { recursive: true, force: true }));
  chmodSync(root, 0o755);
  const project = join(root, 'app');
  mkdirSync(join(project, 'scripts'), { recursive: true });
  const pwned = join(root, 'PWNED');
  writeFileSync(
    join(project, 'routinely.json'),
    JSON.stringify({
      routines: [{ id: 'backup', schedule: '0 0 1 1 *', action: 'command', run: './scripts/backup.sh' }],
    }),
  );
  writeFileSync(join(project, 'scripts', 'backup.sh'), `#!/bin/sh\necho backed up\n`, { mode: 0o755 });
  // the team's shared checkout: group devs may write it (what `chmod 2775` gives)
  spawnSync('chgrp', ['-R', String(gid), project]);
  chmodSync(project, 0o2775);
  chmodSync(join(project, 'scripts'), 0o2775);
  return { root, project, pwned };
}

describe.skipIf(!canAddUsers && process.env.CI !== 'true')(
  'a shared checkout and another local user (SPEC §12)',
  () => {
    it('a group-writable project folder is refused for root before anything runs; the planted script never runs', async () => {
      expect(canAddUsers, 'this test needs root, useradd and groupadd (CI runs as root)').toBe(true);
      const a = attacker();
      const { project, pwned } = sharedProject(a.gid);
      // the attacker plants a script (the folder lets them)
      const plant = spawnSync('runuser', [
        '-u',
        a.user,
        '--',
        'sh',
        '-c',
        `printf '#!/bin/sh\\ntouch ${pwned}\\n' > ${project}/scripts/evil.sh && chmod 755 ${project}/scripts/evil.sh`,
      ]);
      expect(plant.status, plant.stderr?.toString()).toBe(0);
      for (const args of [
        ['routine', 'run', 'backup'],
        ['lock', 'run', '--', 'true'],
        ['scheduler', 'start'],
      ]) {
        const r = await runCli(args, { cwd: project });
        expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
        expect(r.stderr).toMatch(
          new RegExp(
            `refusing the config folder: ${project} is writable by its group \\(gid ${a.gid}, mode 2775\\), which has other members.*Fix: chmod go-w ${project}`,
          ),
        );
      }
      expect(existsSync(pwned)).toBe(false);
      // made safe, it runs
      chmodSync(project, 0o755);
      chmodSync(join(project, 'scripts'), 0o755);
      expect((await runCli(['routine', 'run', 'backup'], { cwd: project })).code).toBe(0);
    });

    it("a folder whose group /etc/group does not list (an LDAP or SSSD team group) counts as shared: refused for root; the other user's script never runs", async () => {
      expect(canAddUsers, 'this test needs root, useradd and groupadd (CI runs as root)').toBe(true);
      const a = attacker();
      // a gid no line of /etc/group names, as a directory's team group is
      const groups = readFileSync('/etc/group', 'utf8');
      let gid = 54321;
      while (new RegExp(`^[^:]*:[^:]*:${gid}:`, 'm').test(groups)) gid++;
      const { project, pwned } = sharedProject(gid);
      // the other user is in that group (the directory says so; here: a supplementary gid), and
      // swaps the script the routine runs (the folder lets them remove and create files)
      const swap = `rm -f ${project}/scripts/backup.sh && printf '#!/bin/sh\ntouch ${pwned}\n' > ${project}/scripts/backup.sh && chmod 755 ${project}/scripts/backup.sh`;
      const plant = spawnSync('setpriv', [`--reuid=${a.uid}`, `--regid=${a.gid}`, `--groups=${gid}`, 'sh', '-c', swap]);
      expect(plant.status, plant.stderr?.toString()).toBe(0);
      for (const args of [
        ['routine', 'run', 'backup'],
        ['scheduler', 'start'],
      ]) {
        const r = await runCli(args, { cwd: project });
        expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
        expect(r.stderr).toMatch(
          new RegExp(
            `refusing the config folder: ${project} is writable by its group \\(gid ${gid}, mode 2775\\), which /etc/group does not list .*Fix: chmod go-w ${project}`,
          ),
        );
      }
      expect(existsSync(pwned)).toBe(false);
    });

    it('a config that is a link owned by the other user, and a state folder swapped for their link, are refused', async () => {
      expect(canAddUsers, 'this test needs root, useradd and groupadd (CI runs as root)').toBe(true);
      const a = attacker();
      const { root, project, pwned } = sharedProject(a.gid);
      chmodSync(project, 0o755);
      chmodSync(join(project, 'scripts'), 0o755);
      // another project's config, elsewhere, that runs the attacker's script
      const other = join(root, 'other');
      mkdirSync(join(other, 'scripts'), { recursive: true, mode: 0o755 });
      writeFileSync(
        join(other, 'routinely.json'),
        JSON.stringify({
          routines: [{ id: 'backup', schedule: '0 0 1 1 *', action: 'command', run: `touch ${pwned}` }],
        }),
      );
      const config = join(project, 'routinely.json');
      rmSync(config);
      symlinkSync(join(other, 'routinely.json'), config);
      lchownSync(config, a.uid, a.gid);
      const r = await runCli(['routine', 'run', 'backup'], { cwd: project });
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(new RegExp(`refusing the config: ${config} is a link owned by uid ${a.uid}`));
      expect(existsSync(pwned)).toBe(false);
      // the same link of root's own: allowed (its target is checked like any config)
      lchownSync(config, 0, 0);
      expect((await runCli(['routine', 'run', 'backup'], { cwd: project })).code).toBe(0);
      rmSync(pwned, { force: true });

      // .routinely swapped for a link of the attacker's, to a folder of theirs
      const theirs = join(root, 'theirs');
      mkdirSync(theirs, { mode: 0o700 });
      spawnSync('chown', [String(a.uid), theirs]);
      rmSync(join(project, '.routinely'), { recursive: true, force: true });
      symlinkSync(theirs, join(project, '.routinely'));
      lchownSync(join(project, '.routinely'), a.uid, a.gid);
      const s = await runCli(['routine', 'run', 'backup'], { cwd: project });
      expect(s.code, s.stderr).toBe(2);
      expect(s.stderr).toMatch(/refusing the state folder: .*\.routinely (is a link owned by|belongs to) uid/);
      expect(spawnSync('find', [theirs, '-mindepth', '1']).stdout.toString()).toBe('');
    });

    it("a task file linked in by the other user (to a task file of root's elsewhere) is refused for root; its task never runs", async () => {
      expect(canAddUsers, 'this test needs root, useradd and groupadd (CI runs as root)').toBe(true);
      const a = attacker();
      const { root, project, pwned } = sharedProject(a.gid);
      chmodSync(project, 0o755);
      chmodSync(join(project, 'scripts'), 0o755);
      writeFileSync(
        join(project, 'routinely.json'),
        JSON.stringify({ exec: { tasks: [{ id: 'build', run: 'true' }], taskDirs: ['tasks'] } }),
      );
      // another project of root's, with a task that must never run here
      const other = join(root, 'other', 'tasks');
      mkdirSync(other, { recursive: true, mode: 0o755 });
      writeFileSync(join(other, 'cleanup.json'), JSON.stringify({ id: 'cleanup', run: `touch ${pwned}` }), {
        mode: 0o644,
      });
      // the task folder, given to the attacker (or made writable for the team)
      const tasks = join(project, 'tasks');
      mkdirSync(tasks, { mode: 0o755 });
      spawnSync('chown', [String(a.uid), tasks]);
      const plant = spawnSync('runuser', [
        '-u',
        a.user,
        '--',
        'ln',
        '-s',
        join(other, 'cleanup.json'),
        join(tasks, 'cleanup.json'),
      ]);
      expect(plant.status, plant.stderr?.toString()).toBe(0);
      const r = await runCli(['exec', 'run'], { cwd: project });
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(
        new RegExp(`refusing the task folder: ${tasks} belongs to uid ${a.uid}, neither root nor you`),
      );
      expect(existsSync(pwned)).toBe(false);
      // the folder root's again, the link still the attacker's: refused by the link's owner
      spawnSync('chown', ['0', tasks]);
      const l = await runCli(['exec', 'run'], { cwd: project });
      expect(l.code, l.stderr).toBe(2);
      expect(l.stderr).toMatch(
        new RegExp(`refusing the task file: ${join(tasks, 'cleanup.json')} is a link owned by uid ${a.uid}`),
      );
      expect(existsSync(pwned)).toBe(false);
      // root's own link to a folder the attacker may write: refused by the target's folder
      const drop = join(root, 'drop');
      mkdirSync(drop, { mode: 0o777 });
      chmodSync(drop, 0o777);
      writeFileSync(join(drop, 'cleanup.json'), JSON.stringify({ id: 'cleanup', run: `touch ${pwned}` }), {
        mode: 0o644,
      });
      rmSync(join(tasks, 'cleanup.json'));
      symlinkSync(join(drop, 'cleanup.json'), join(tasks, 'cleanup.json'));
      const d = await runCli(['exec', 'run'], { cwd: project });
      expect(d.code, d.stderr).toBe(2);
      expect(d.stderr).toMatch(new RegExp(`refusing the task file: ${drop} is writable by every user`));
      expect(existsSync(pwned)).toBe(false);
      // root's own link to root's own task file: followed, and the task runs
      rmSync(join(tasks, 'cleanup.json'));
      symlinkSync(join(other, 'cleanup.json'), join(tasks, 'cleanup.json'));
      const ok = await runCli(['exec', 'run'], { cwd: project });
      expect(ok.code, ok.stderr).toBe(0);
      expect(existsSync(pwned)).toBe(true);
    });
  },
);

describe('a state folder swapped under a running scheduler (SPEC §12)', () => {
  it(
    '.routinely replaced by a link to another folder: nothing is written there, the scheduler stays up and says why, and goes on when it is back',
    { timeout: 90_000 },
    async () => {
      const project = mkdtempSync(join(tmpdir(), 'routinely-swap-'));
      onTestFinished(() => rmSync(project, { recursive: true, force: true }));
      const other = join(project, 'other');
      mkdirSync(other, { mode: 0o700 });
      writeFileSync(
        join(project, 'routinely.json'),
        JSON.stringify({
          lock: { ttlSeconds: 4 },
          routines: [{ id: 'tick', schedule: '* * * * * *', action: 'command', run: 'echo tick' }],
        }),
      );
      const { startCli, eventually } = await import('../helpers/cli.js');
      const { httpGet } = await import('../helpers/http.js');
      const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0'], { cwd: project, timeoutMs: 85_000 });
      const url = (await s.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
      await s.waitFor(/\[routine\] succeeded tick/);
      const { renameSync } = await import('node:fs');
      renameSync(join(project, '.routinely'), join(project, 'real'));
      symlinkSync(other, join(project, '.routinely'));
      const mark = s.stdout().length;
      // noticed by the next state write (a fire), or first by the lock's heartbeat, which cannot
      // write its beat either (on a loaded machine its TTL may run out first): either way it says so
      // (which write meets it first decides the words: the folder replaced or gone, a log append
      // that found no folder, or the heartbeat that cannot be written)
      const noticed =
        /\[scheduler\] state folder not writable: .*(\.routinely (was replaced|is gone) while routinely ran|the scheduler lock cannot be kept|ENOENT)/;
      await eventually(
        () => noticed.test(s.stdout().slice(mark)),
        30_000,
        'the swap noticed',
        () => s.stdout().slice(mark).split('\n').slice(-20).join('\n'),
      );
      const h = await httpGet(`${url}healthz`);
      expect(h.status).toBe(503);
      expect(h.body).toMatch(/state folder not writable/);
      await new Promise((r) => setTimeout(r, 2 * 4000));
      expect(s.child.exitCode, s.stdout()).toBeNull();
      expect(
        spawnSync('find', [other, '-mindepth', '1']).stdout.toString(),
        'nothing written through the swapped path',
      ).toBe('');
      expect(
        s
          .stdout()
          .slice(mark)
          .match(/state folder not writable/g),
        s.stdout().slice(mark),
      ).toHaveLength(1);
      rmSync(join(project, '.routinely'));
      renameSync(join(project, 'real'), join(project, '.routinely'));
      const back = s.stdout().length;
      await eventually(
        () => /\[routine\] succeeded tick/.test(s.stdout().slice(back)),
        20_000,
        'fires again once it is back',
      );
      s.child.kill('SIGTERM');
      expect((await s.exited).code).toBe(0);
    },
  );
});
