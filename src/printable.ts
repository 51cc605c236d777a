// Strings that come from records (a lock's owner host and command, a database row) are printed
// with control characters escaped (SPEC §12): a record must not be able to move the cursor,
// rewrite the terminal's title, or hide text from the person reading it.

// C0 controls, DEL and C1 controls (which include the 8-bit CSI).
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;

export function printable(s: string): string {
  return s.replace(CONTROL, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}
