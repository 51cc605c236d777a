// The one escaping rule for what reaches a terminal (SPEC §12), whole and in pieces.

import { describe, expect, it } from 'vitest';
import { TerminalStream, terminalText } from '../src/printable.js';

const SAMPLE = 'é title\u001b]0;pwned\u0007 clear\u001b[2J home\rover \u001b[1;31mred\u001b[0m ✓ \u009b2J\n';

describe('terminalText and TerminalStream', () => {
  it('keeps text, newlines, tabs and colour; escapes every other control character', () => {
    expect(terminalText(SAMPLE)).toBe(
      String.raw`é title\x1b]0;pwned\x07 clear\x1b[2J home\x0dover ` +
        '\u001b[1;31mred\u001b[0m ✓ ' +
        String.raw`\u009b2J` +
        '\n',
    );
    expect(terminalText('a\tb\n')).toBe('a\tb\n');
  });

  it('a stream cut anywhere (inside a UTF-8 character, an ESC sequence) gives what the whole text gives', () => {
    const bytes = Buffer.from(SAMPLE);
    for (let size = 1; size <= 7; size++) {
      const s = new TerminalStream();
      let out = '';
      for (let i = 0; i < bytes.length; i += size) out += s.push(bytes.subarray(i, i + size));
      out += s.end();
      expect(out, `pieces of ${size} bytes`).toBe(terminalText(SAMPLE));
    }
  });

  it('an ESC left at the very end is escaped when the stream ends', () => {
    const s = new TerminalStream();
    expect(s.push(Buffer.from('ok \u001b['))).toBe('ok ');
    expect(s.end()).toBe(String.raw`\x1b[`);
  });
});
