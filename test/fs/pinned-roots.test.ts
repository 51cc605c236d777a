// A state root swapped in two steps — moved away, then a symlink put at its name — is never
// adopted (SPEC §12): checked while it is gone, it stays pinned, so the link that appears next
// is refused as a replacement; the real folder put back is accepted again.

import { mkdirSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FolderReplacedError } from '../../src/errors.js';
import { checkFolder, trustRoot } from '../../src/fs/files.js';
import { testdir } from '../helpers/testdir.js';

describe('a pinned state root', () => {
  it('gone, then a link to another folder, then back: refused, refused, accepted', () => {
    const root = testdir();
    const state = join(root, '.routinely');
    mkdirSync(join(state, 'history'), { recursive: true, mode: 0o700 });
    const other = join(root, 'other');
    mkdirSync(join(other, 'history'), { recursive: true, mode: 0o700 });
    trustRoot(state);
    checkFolder(join(state, 'history'));
    renameSync(state, join(root, 'real'));
    // in the gap of the swap: not "missing, create it again", which would adopt what comes next
    expect(() => checkFolder(join(state, 'history'))).toThrow(FolderReplacedError);
    expect(() => checkFolder(join(state, 'history'))).toThrow(/\.routinely is gone while routinely ran/);
    symlinkSync(other, state);
    expect(() => checkFolder(join(state, 'history'))).toThrow(/\.routinely was replaced while routinely ran/);
    rmSync(state);
    renameSync(join(root, 'real'), state);
    expect(() => checkFolder(join(state, 'history'))).not.toThrow();
  });

  it('a folder below the root that is deleted is simply created again', () => {
    const root = testdir();
    const state = join(root, '.routinely');
    mkdirSync(join(state, 'history'), { recursive: true, mode: 0o700 });
    trustRoot(state);
    checkFolder(join(state, 'history'));
    rmSync(join(state, 'history'), { recursive: true });
    expect(() => checkFolder(join(state, 'history'))).not.toThrow();
    mkdirSync(join(state, 'history'), { mode: 0o700 });
    expect(() => checkFolder(join(state, 'history'))).not.toThrow();
  });
});
