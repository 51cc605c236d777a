// `routinely import-crontab [FILE|-]` (SPEC §10): prints a crontab's jobs as routinely.json
// content on stdout; what it could not carry, or carried with another meaning, on stderr too.

import { resolve } from 'node:path';
import { importCrontab } from '../config/crontab.js';
import { ExitCode, UsageError } from '../errors.js';
import { readInputFile } from '../fs/ops.js';
import { err } from './io.js';

/** A crontab is a few kilobytes; a larger input is not one. */
const MAX_BYTES = 1 << 20;

export async function importCrontabCommand(file: string | undefined, flags: { system?: boolean }): Promise<number> {
  const fromStdin = file === undefined || file === '-';
  if (fromStdin && process.stdin.isTTY) {
    throw new UsageError('import-crontab reads a crontab from FILE or from standard input: routinely import-crontab /etc/cron.d/backup, or crontab -l | routinely import-crontab -');
  }
  const source = fromStdin ? 'stdin' : file;
  const text = fromStdin ? await readStdin() : readCrontab(file);
  const system = flags.system === true || (!fromStdin && /^\/etc\/(crontab$|cron\.d\/)/.test(resolve(file)));
  const imported = importCrontab(text, { source, system });
  process.stdout.write(imported.text);
  for (const note of imported.notes) err(`routinely: import-crontab: ${note}`);
  return ExitCode.OK;
}

function readCrontab(file: string): string {
  let bytes: Buffer;
  try {
    bytes = readInputFile(file, MAX_BYTES);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new UsageError(
      code === 'ENOTREG' ? `${file} is not a regular file` :
      code === 'EFBIG' ? `${file} is over ${MAX_BYTES} bytes: not a crontab` :
      `cannot read ${file}: ${code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : (e as Error).message}`,
    );
  }
  return decoded(bytes, file);
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of process.stdin as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > MAX_BYTES) throw new UsageError(`standard input is over ${MAX_BYTES} bytes: not a crontab`);
    chunks.push(chunk);
  }
  return decoded(Buffer.concat(chunks), 'standard input');
}

function decoded(bytes: Buffer, what: string): string {
  const text = bytes.toString('utf8');
  if (text.includes('\0')) throw new UsageError(`${what} holds NUL bytes: not a crontab`);
  return text;
}
