import { describe, expect, it } from 'vitest';
import { dbError } from '../../src/pg/connect.js';

const msg = (err: object): string => dbError('db:5432/app', err).message;

describe('database errors name their real cause', () => {
  it('a parameter a pooler refuses is not a timeout', () => {
    expect(msg({ code: '08P01', message: 'unsupported startup parameter: statement_timeout' })).toBe('database db:5432/app: unsupported startup parameter: statement_timeout (08P01)');
  });

  it('a wait for our own pool is not the database timing out; each timeout says which', () => {
    expect(msg(new Error('timeout exceeded when trying to connect'))).toMatch(/all 4 connections of this process stayed busy for 5s \(a wait for this process's own connection pool, not for the database\)/);
    expect(msg(new Error('Connection terminated due to connection timeout'))).toMatch(/timed out connecting/);
    expect(msg(new Error('Query read timeout'))).toMatch(/no answer within 17s/);
    expect(msg({ code: '57014', message: 'canceling statement due to statement timeout' })).toMatch(/ran past 15s and was canceled \(57014\)/);
  });

  it('a read-only server says how to reach the primary', () => {
    expect(msg({ code: '25006', message: 'cannot execute INSERT in a read-only transaction' })).toMatch(/the server is read-only \(a standby\?\) \(25006\): point the URL at the primary, or list every host with target_session_attrs=read-write/);
  });

  it('never the password', () => {
    expect(msg(new Error('could not connect to postgres://app:hunter2@db/app'))).not.toContain('hunter2');
  });
});
