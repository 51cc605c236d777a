import { describe, expect, it } from 'vitest';
import { findJsonSyntaxError, lineColumn } from '../../src/config/json-syntax.js';
import { parseJsonFile } from '../../src/config/load.js';

const at = (text: string): string | null => {
  const e = findJsonSyntaxError(text);
  if (!e) return null;
  const { line, column } = lineColumn(text, e.offset);
  return `${line}:${column} ${e.message}`;
};

describe('findJsonSyntaxError', () => {
  it.each([
    ['{\n  "a": 1,\n}', '2:9 trailing comma before "}" (JSON allows none)'],
    ['{\n  "a": [1, 2,],\n  "b": 1\n}', '2:13 trailing comma before "]" (JSON allows none)'],
    ['{ "a": 1 "b": 2 }', '1:10 expected "," or "}", found "\\""'],
    ['{ a: 1 }', '1:3 expected a property name in double quotes, found "a"'],
    ["{ 'a': 1 }", '1:3 expected a property name in double quotes, found "\'"'],
    ['{ "a" 1 }', '1:7 expected ":" after the property name, found "1"'],
    ['{ "a": tru }', '1:8 expected a value, found "t"'],
    ['{ "a": "x\ny" }', '1:10 line break inside a string (missing closing quote?)'],
    ['{ "a": "x', '1:8 string never closed (missing closing quote)'],
    ['{ "a": 1 } x', '1:12 unexpected "x" after the end of the JSON document'],
    ['', '1:1 unexpected end of the file (a value is missing)'],
    ['{ "a": ', '1:8 unexpected end of the file (a value is missing)'],
    ['{ "a": 1', '1:9 expected "," or "}", found the end of the file'],
    ['{ "a": "\\q" }', '1:9 invalid escape "\\\\q" in a string'],
  ])('%j', (text, expected) => {
    expect(() => JSON.parse(text)).toThrow();
    expect(at(text)).toBe(expected);
  });

  it.each([['{}'], ['[]'], ['{ "a": [1, -2.5e3, true, false, null, "x\\n\\u00e9"], "b": {} }'], [' 0 ']])(
    'accepts %j as JSON.parse does',
    (text) => {
      expect(() => JSON.parse(text)).not.toThrow();
      expect(findJsonSyntaxError(text)).toBeNull();
    },
  );
});

describe('parseJsonFile', () => {
  it('names the file, line and column, also past comments', () => {
    const text = '{\n  // the lock\n  "lock": { "ttlSeconds": 5 },\n  /* routines */\n  "routines": [\n  ],\n}\n';
    expect(() => parseJsonFile(text, 'routinely.json')).toThrow(
      'routinely.json: line 6, column 4: invalid JSON: trailing comma before "}" (JSON allows none)',
    );
  });

  // JSON.parse keeps the last of two equal keys without a word: the first "routines" was dropped
  it('refuses a key given twice in one object (also spelled with an escape), naming where; equal keys in different objects are fine', () => {
    expect(() => parseJsonFile('{"routines": [1],\n "routines": []}', 'routinely.json')).toThrow(
      'routinely.json: line 2, column 2: duplicate key "routines" in this object (JSON keeps only the last)',
    );
    expect(() => parseJsonFile('{"a": {"id": 1, "\\u0069d": 2}}', 'x.json')).toThrow(/column 17: duplicate key "id"/);
    expect(parseJsonFile('{"a": {"id": 1}, "b": {"id": 2}, "c": [{"id": 3}, {"id": 4}]}', 'x.json')).toEqual({
      a: { id: 1 },
      b: { id: 2 },
      c: [{ id: 3 }, { id: 4 }],
    });
  });
});
