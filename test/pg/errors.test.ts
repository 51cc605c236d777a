// Whether a failed statement may have committed (SPEC §9): decided from what the driver said,
// carried by the error, never from its message's wording.

import { describe, expect, it } from 'vitest';
import { dbError } from '../../src/pg/connect.js';
import { claimMayHaveCommitted } from '../../src/state/spooling-store.js';

const err = (code: string | undefined, message = 'x'): Error => Object.assign(new Error(message), code ? { code } : {});

describe('claimMayHaveCommitted', () => {
  it('is false only when the statement never reached a server that could run it', () => {
    for (const code of ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', '28P01', '28000', '3D000']) {
      expect(claimMayHaveCommitted(dbError('h:5432/db', err(code))), code).toBe(false);
    }
    for (const [code, message] of [
      ['ECONNRESET', 'x'],
      [undefined, 'Query read timeout'],
      ['57014', 'canceled'],
      ['57P01', 'terminating'],
      [undefined, 'Connection terminated unexpectedly'],
    ] as const) {
      expect(claimMayHaveCommitted(dbError('h:5432/db', err(code, message))), `${code} ${message}`).toBe(true);
    }
    // not a database error at all: a bug, not a lost answer
    expect(claimMayHaveCommitted(new Error('connection refused'))).toBe(false);
  });

  it('does not depend on the words of the message', () => {
    const refused = dbError('h:5432/db', err('ECONNREFUSED'));
    expect(claimMayHaveCommitted(Object.assign(refused, { message: 'anything at all' }))).toBe(false);
  });
});
