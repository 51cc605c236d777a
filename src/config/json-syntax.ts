// Where a JSON text first breaks, and how, for messages like `routinely.json: line 7, column 3:
// invalid JSON: trailing comma before "}"`. JSON.parse names a position for some errors only (V8
// gives none for `[1, 2,]` and quotes the whole text instead), so this small recursive-descent
// checker runs once JSON.parse has failed, on the same text (comments already blanked out) — and
// after it succeeded too, for a key given twice in one object, which JSON.parse takes silently.
//
// Not jsonc-parser (3.3.1, weighed): it reports codes at offsets, not causes (`{"a": 1,}` gives
// PropertyNameExpected and ValueExpected at the `}`), so the words users need ("trailing comma",
// "line break inside a string") would take this much code on top, and 112 KB more to load.

export interface JsonSyntaxError {
  /** Offset of the offending character in the text. */
  offset: number;
  message: string;
}

class Broken {
  constructor(readonly at: JsonSyntaxError) {}
}

/** Nesting past which the checker stops looking (null: nothing found), before the stack runs out;
 * validation refuses such a document anyway (nesting deeper than a config needs). */
const MAX_DEPTH = 512;
class TooDeep {}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
// the characters a string may hold as they are (not a quote, a backslash or a control character)
const PLAIN = /[^"\\\u0000-\u001f]*/y;

export function findJsonSyntaxError(text: string): JsonSyntaxError | null {
  let i = 0;
  const fail = (message: string, offset = i): never => {
    throw new Broken({ offset, message });
  };
  const found = (at: number): string => (at >= text.length ? 'the end of the file' : JSON.stringify(text[at]));
  const skipSpace = (): void => {
    while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++;
  };

  const string = (): void => {
    const start = i++;
    for (; i < text.length; i++) {
      // past the ordinary characters at once (a config is mostly these)
      PLAIN.lastIndex = i;
      PLAIN.test(text);
      i = PLAIN.lastIndex;
      if (i >= text.length) break;
      const c = text[i]!;
      if (c === '"') {
        i++;
        return;
      }
      if (c === '\\') {
        const e = text[i + 1];
        if (e === 'u' && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) i += 5;
        else if (e !== undefined && '"\\/bfnrt'.includes(e)) i++;
        else fail(`invalid escape ${JSON.stringify(`\\${e ?? ''}`)} in a string`);
      } else if (c < ' ') {
        fail(c === '\n' ? 'line break inside a string (missing closing quote?)' : 'control character inside a string');
      }
    }
    fail('string never closed (missing closing quote)', start);
  };

  const container = (close: '}' | ']', member: () => void): void => {
    i++;
    skipSpace();
    if (text[i] === close) {
      i++;
      return;
    }
    for (;;) {
      member();
      skipSpace();
      if (text[i] === close) {
        i++;
        return;
      }
      if (text[i] !== ',') fail(`expected "," or "${close}", found ${found(i)}`);
      const comma = i++;
      skipSpace();
      if (text[i] === close) fail(`trailing comma before "${close}" (JSON allows none)`, comma);
    }
  };

  let depth = 0;
  const value = (): void => {
    skipSpace();
    const c = text[i];
    if ((c === '{' || c === '[') && ++depth > MAX_DEPTH) throw new TooDeep();
    if (c === '{') {
      const keys = new Set<string>();
      container('}', () => {
        skipSpace();
        if (text[i] !== '"') fail(`expected a property name in double quotes, found ${found(i)}`);
        const start = i;
        string();
        // JSON.parse keeps the last of two equal keys without a word: `"routines"` twice drops
        // the first list
        const raw = text.slice(start + 1, i - 1);
        const key = raw.includes('\\') ? (JSON.parse(`"${raw}"`) as string) : raw;
        if (keys.has(key))
          fail(`duplicate key ${JSON.stringify(key)} in this object (JSON keeps only the last)`, start);
        keys.add(key);
        skipSpace();
        if (text[i] !== ':') fail(`expected ":" after the property name, found ${found(i)}`);
        i++;
        value();
      });
      depth--;
      return;
    }
    if (c === '[') {
      container(']', value);
      depth--;
      return;
    }
    if (c === '"') return string();
    NUMBER.lastIndex = i;
    if (NUMBER.test(text)) {
      i = NUMBER.lastIndex;
      return;
    }
    for (const word of ['true', 'false', 'null']) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return;
      }
    }
    fail(i >= text.length ? 'unexpected end of the file (a value is missing)' : `expected a value, found ${found(i)}`);
  };

  try {
    value();
    skipSpace();
    if (i < text.length) fail(`unexpected ${found(i)} after the end of the JSON document`);
    return null;
  } catch (err) {
    if (err instanceof Broken) return err.at;
    if (err instanceof TooDeep) return null;
    throw err;
  }
}

/** 1-based line and column of an offset. */
export function lineColumn(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset);
  const lastBreak = before.lastIndexOf('\n');
  return { line: before.split('\n').length, column: offset - lastBreak };
}
