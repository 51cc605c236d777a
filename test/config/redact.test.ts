import { describe, expect, it } from 'vitest';
import { redactUrl } from '../../src/config/load.js';

describe('database passwords never reach a message (SPEC §12)', () => {
  it.each([
    ['postgres://alice:S3cret@db:5432/app', 'postgres://alice:***@db:5432/app'],
    ['postgresql://alice:S3cret@db/app?sslmode=require', 'postgresql://alice:***@db/app?sslmode=require'],
    ['alice:S3cret@host/db', 'alice:***@host/db'],
    ['postgres://alice@db/app?password=S3cret&sslmode=verify-full', 'postgres://alice@db/app?password=***&sslmode=verify-full'],
    ['host=db user=alice password=S3cret dbname=app', 'host=db user=alice password=*** dbname=app'],
    ["host=db password='S3 cret' dbname=app", 'host=db password=*** dbname=app'],
    ['http://u:hunter2@h/d', 'http://u:***@h/d'],
    ['postgres://db/app', 'postgres://db/app'],
  ])('%s', (input, shown) => {
    expect(redactUrl(input)).toBe(shown);
    expect(redactUrl(input)).not.toMatch(/S3cret|S3 cret|hunter2/);
  });
});
