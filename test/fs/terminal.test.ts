// The process's own output (fs/terminal.ts): writeOut writes everything to a descriptor at once,
// also to a non-blocking pipe whose reader is slow (EAGAIN is waited out, not an error).

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { writeOut } from '../../src/fs/terminal.js';
import { testdir } from '../helpers/testdir.js';

describe('writeOut', () => {
  it('writes 4 MB whole through a non-blocking pipe whose reader starts late', async () => {
    const out = join(testdir(), 'got');
    // the reader waits before reading: the pipe (64 KB) fills and our writes meet EAGAIN
    const reader = spawn('sh', ['-c', `sleep 0.3; cat > '${out}'`], { stdio: ['pipe', 'ignore', 'inherit'] });
    const fd = (reader.stdin as unknown as { _handle: { fd: number } })._handle.fd;
    expect(fd).toBeGreaterThan(2); // a pipe of ours, non-blocking as Node's streams make them
    const text = 'x'.repeat(4 * 1024 * 1024 - 1) + '\n';
    writeOut(fd, text);
    reader.stdin!.end();
    const code = await new Promise((resolve) => reader.on('close', resolve));
    expect(code).toBe(0);
    expect(readFileSync(out, 'utf8')).toBe(text);
  });
});
