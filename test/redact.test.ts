// Redaction that cannot be fooled (SPEC §12): a fixed-seed fuzz over generated passwords and URL
// shapes, embedded in the messages routinely prints.
import { describe, expect, it } from 'vitest';
import { redactUrl } from '../src/config/load.js';
import { redactSecrets } from '../src/redact.js';
import { parsePgUrl } from '../src/config/database-url.js';
import { rng } from './helpers/rng.js';

const CHARS = 'abcdefXYZ0123456789/+=@#?%[]:!$&()*,;~-._';

describe('redaction of passwords in URLs', () => {
  it('a password of any character, once its URL was parsed as libpq reads it, is never shown (spaces, quotes, an "@" in a query)', () => {
    const next = rng(20261202);
    const ANY = `${CHARS} "'\t<>\``;
    for (let i = 0; i < 500; i++) {
      let pass = `Zq${i}`;
      while (pass.length < 8 + (i % 12)) pass += ANY[Math.floor(next() * ANY.length)]!;
      for (const url of [
        `postgres://app:${pass}@db.internal:5432/app`,
        `postgres://app@db/app?password=${pass.replace(/[&#]/g, '')}&sslmode=disable`,
      ]) {
        parsePgUrl(url); // as every command does before it says anything of the URL
        const secret = url.includes('?password=') ? pass.replace(/[&#]/g, '') : pass;
        for (const message of [
          url,
          `ROUTINELY_DATABASE_URL: "${url}" is port 99999`,
          `database ${url}: connection refused`,
        ]) {
          expect(redactSecrets(message), message).not.toContain(secret);
        }
      }
    }
  });

  it.each([
    ['postgres://alice:S3cret@db:5432/app', 'postgres://alice:***@db:5432/app'],
    ['postgresql://alice:S3cret@db/app?sslmode=require', 'postgresql://alice:***@db/app?sslmode=require'],
    ['alice:S3cret@host/db', 'alice:***@host/db'],
    [
      'postgres://alice@db/app?password=S3cret&sslmode=verify-full',
      'postgres://alice@db/app?password=***&sslmode=verify-full',
    ],
    ['host=db user=alice password=S3cret dbname=app', 'host=db user=alice password=*** dbname=app'],
    ["host=db password='S3 cret' dbname=app", 'host=db password=*** dbname=app'],
    ['postgres://db/app', 'postgres://db/app'],
  ])('redactUrl(%s)', (input, shown) => {
    expect(redactUrl(input)).toBe(shown);
    expect(redactUrl(input)).not.toMatch(/S3cret|S3 cret/);
  });

  it('known shapes', () => {
    expect(redactUrl('postgres://app:Zm9v/YmFy+cXV4@db.internal:5432/app')).toBe(
      'postgres://app:***@db.internal:5432/app',
    );
    expect(redactUrl('postgres://rt:p@ss@[bad')).toBe('postgres://rt:***@[bad');
    expect(redactUrl('postgres://u:pa?ss#x@h/db')).toBe('postgres://u:***@h/db');
    expect(redactUrl('http://u:hunter2@h/d')).toBe('http://u:***@h/d');
    expect(redactUrl('postgres://h/db?password=hunter2&x=1')).toBe('postgres://h/db?password=***&x=1');
    expect(redactUrl('postgres://app@db/app')).toBe('postgres://app@db/app');
    expect(redactSecrets('host=db password=hunter2 user=app')).toBe('host=db password=*** user=app');
    expect(redactSecrets('connect to app:hunter2@db failed')).toBe('connect to app:***@db failed');
  });

  it('2000 generated passwords in 6 URL shapes, inside messages: never a password, never a 4-character piece of one', () => {
    const next = rng(20261201);
    const pick = (s: string): string => s[Math.floor(next() * s.length)]!;
    for (let i = 0; i < 2000; i++) {
      const len = 6 + Math.floor(next() * 20);
      // a marker that cannot occur elsewhere in the message, then random characters
      let pass = `Q${String.fromCharCode(65 + (i % 26))}w`;
      while (pass.length < len) pass += pick(CHARS);
      const shapes = [
        `postgres://app:${pass}@db.internal:5432/app`,
        `postgresql://app:${pass}@h1:5432,h2:5433/app?target_session_attrs=read-write`,
        `postgres://:${pass}@[::1]:5432/app`,
        `postgres://app:${pass}@`,
        `https://hooks.example/x?u=1&password=${encodeURIComponent(pass)}`,
        `postgres://${pass}@db/app`,
      ];
      for (const url of shapes) {
        for (const message of [
          url,
          `ROUTINELY_DATABASE_URL: "${url}" is not a URL`,
          `database ${url}: connection refused`,
        ]) {
          const shown = redactSecrets(message);
          let secret = url.startsWith('https') ? encodeURIComponent(pass) : pass;
          if (url.startsWith(`postgres://${pass}@`)) {
            // no ':' of ours: what is before the first ':' is the user name, shown when plain
            const colon = pass.indexOf(':');
            if (colon < 0 && /^[A-Za-z0-9._-]+$/.test(pass)) continue; // a plain user name, no password
            if (colon > 0 && /^[A-Za-z0-9._-]+$/.test(pass.slice(0, colon))) secret = pass.slice(colon + 1);
            if (secret.length < 4) continue;
          }
          expect(shown, message).not.toContain(secret);
          for (let k = 0; k + 4 <= secret.length; k++) {
            const piece = secret.slice(k, k + 4);
            if (/[A-Za-z0-9]{4}/.test(piece) && !message.replace(secret, '').includes(piece))
              expect(shown, `${message} shows ${piece}`).not.toContain(piece);
          }
        }
      }
    }
  });
});
