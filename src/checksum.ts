// Records rewritten in place (a routine's index, a lock holder's heartbeat): the text and its
// checksum on a second line, so that a reader that meets a write half done — or the mix of two
// writers, or a crash — sees a checksum that does not match and takes the record as missing,
// never as something it does not say. No imports: the lock and the state layer both use it.

/** FNV-1a (32 bit) of a string, in hex: enough to tell a torn mix of two versions from either. */
export function fnv1a(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(16).padStart(8, '0');
}

/** `text` (one line) framed with its checksum, padded with newlines to `size` bytes when given
 * (a fixed-size record is rewritten over the same blocks: no new ones on a full disk). */
export function frameChecksummed(text: string, size = 0): Buffer {
  const framed = Buffer.from(`${text}\n${fnv1a(text)}\n`, 'utf8');
  if (framed.length >= size) return framed;
  const padded = Buffer.alloc(size, 0x0a);
  framed.copy(padded);
  return padded;
}

/** The text of a framed record, or null when it is torn or not one. */
export function readChecksummed(content: string): string | null {
  const body = content.replace(/\n+$/, '\n');
  const end = body.lastIndexOf('\n', body.length - 2);
  if (end < 0 || !body.endsWith('\n')) return null;
  const text = body.slice(0, end);
  return body.slice(end + 1, -1) === fnv1a(text) ? text : null;
}
