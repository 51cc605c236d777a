// A throwaway PostgreSQL cluster (tests and benchmarks): initdb in a temp folder, started on a
// free port with trust authentication on 127.0.0.1 only. As root, the server runs as the
// `postgres` user (initdb refuses root). Debian's postgresql package provides the binaries.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export function findPgBin() {
  const root = '/usr/lib/postgresql';
  if (existsSync(root)) {
    const versions = readdirSync(root)
      .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
      .sort((a, b) => Number(b) - Number(a));
    if (versions[0]) return join(root, versions[0], 'bin');
  }
  const p = spawnSync('sh', ['-c', 'command -v initdb'], { encoding: 'utf8' }).stdout.trim();
  return p ? join(p, '..') : null;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

/** Runs a PostgreSQL binary, as `postgres` when we are root. */
export function pgCommand(cluster, tool, args) {
  const exe = join(cluster.bin, tool);
  const argv = cluster.runAs ? ['runuser', '-u', cluster.runAs, '--', exe, ...args] : [exe, ...args];
  return execFileSync(argv[0], argv.slice(1), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

export async function startCluster() {
  const bin = findPgBin();
  if (!bin) throw new Error('PostgreSQL binaries not found (install Debian package "postgresql")');
  const runAs = process.getuid?.() === 0 ? 'postgres' : null;
  const dataDir = mkdtempSync(join(tmpdir(), 'routinely-pg-'));
  if (runAs) execFileSync('chown', [runAs, dataDir]);
  const port = await freePort();
  const cluster = { url: `postgres://postgres@127.0.0.1:${port}/postgres`, dataDir, bin, runAs };
  pgCommand(cluster, 'initdb', [
    '-D',
    dataDir,
    '-U',
    'postgres',
    '--auth=trust',
    '--no-sync',
    '-E',
    'UTF8',
    '--locale=C',
  ]);
  startServer(cluster);
  return cluster;
}

export function startServer(cluster) {
  const port = Number(new URL(cluster.url).port);
  pgCommand(cluster, 'pg_ctl', [
    '-D',
    cluster.dataDir,
    '-w',
    '-t',
    '30',
    '-l',
    join(cluster.dataDir, 'server.log'),
    '-o',
    `-p ${port} -k ${cluster.dataDir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`,
    'start',
  ]);
}

export function stopServer(cluster, mode = 'fast') {
  pgCommand(cluster, 'pg_ctl', ['-D', cluster.dataDir, '-w', '-m', mode, 'stop']);
}

export function destroyCluster(cluster) {
  try {
    stopServer(cluster, 'immediate');
  } catch {
    // already stopped
  }
  rmSync(cluster.dataDir, { recursive: true, force: true });
}
