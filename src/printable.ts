// Strings that come from records (a lock's owner host and command, a database row) are printed
// with control characters escaped (SPEC §12): a record must not be able to move the cursor,
// rewrite the terminal's title, or hide text from the person reading it.

import { StringDecoder } from 'node:string_decoder';

// C0 controls, DEL and C1 controls (which include the 8-bit CSI).
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;

export function printable(s: string): string {
  return s.replace(CONTROL, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

// What a terminal may be sent: text, newlines, tabs, and colour (SGR: ESC [ digits ; m) — the
// colours our own views paint. Every other control character is escaped: nothing from a record
// can clear the screen, move the cursor, set a window title (OSC) or forge a line.
// eslint-disable-next-line no-control-regex
const TERMINAL_UNSAFE = /\u001b\[[0-9;]*m|[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

const hex2 = (c: string): string => c.charCodeAt(0).toString(16).padStart(2, '0');

/** Output for a terminal or a log file (SPEC §12): see TERMINAL_UNSAFE. C1 controls and DEL
 * become `\u00XX`, which also keeps JSON output valid; other C0 controls become `\xHH`. */
export function terminalText(s: string): string {
  return s.replace(TERMINAL_UNSAFE, (m) =>
    m.length > 1 ? m : m.charCodeAt(0) >= 0x7f ? `\\u00${hex2(m)}` : `\\x${hex2(m)}`,
  );
}

/** A JSON document (JSON.stringify escapes C0 but leaves DEL and C1 raw): those escaped too. */
export function jsonText(json: string): string {
  // eslint-disable-next-line no-control-regex
  return json.replace(/[\u007f-\u009f]/g, (c) => `\\u00${hex2(c)}`);
}

/** terminalText for a stream that arrives in pieces (a followed log): a UTF-8 character or a
 * colour sequence split between two pieces is judged whole, once its end has come. */
export class TerminalStream {
  private readonly decoder = new StringDecoder('utf8');
  private held = '';

  /** The text of `chunk` that is complete, escaped. */
  push(chunk: Buffer): string {
    const s = this.held + this.decoder.write(chunk);
    // an ESC near the end that may still become a colour sequence waits for the next piece
    const esc = s.lastIndexOf('\u001b');
    if (esc >= 0 && s.length - esc <= MAX_SGR && PARTIAL_SGR.test(s.slice(esc))) {
      this.held = s.slice(esc);
      return terminalText(s.slice(0, esc));
    }
    this.held = '';
    return terminalText(s);
  }

  /** What is left at the end, escaped. */
  end(): string {
    const s = this.held + this.decoder.end();
    this.held = '';
    return terminalText(s);
  }
}

/** ESC, or ESC [ followed by digits and semicolons, not yet ended by its `m`. */
// eslint-disable-next-line no-control-regex
const PARTIAL_SGR = /^\u001b(\[[0-9;]*)?$/;
const MAX_SGR = 32;
