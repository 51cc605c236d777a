// Passwords never printed (SPEC §12): in any text, every URL-shaped token with a user part has
// everything between `scheme://` and its last `@` replaced — however the password is written
// (`/`, `@`, `#`, `?`, `%`, brackets, an unparsable rest). Only a plain user name (letters,
// digits, `._-`) before a `:` is kept, for the reader: `postgres://app:***@db:5432/app`.
// Then `password=…` parameters (a URL query, a libpq key-value string).

// a token runs to whitespace or a quote: what a URL in a message or a config value can be
const URL_TOKEN = /([a-z][a-z0-9+.-]*:\/\/)([^\s"'<>`]*)/gi;

/** Passwords this process knows (a database URL it parsed): replaced wherever they appear,
 * whatever they hold — a space, a quote, an `@` in a query — before the shape rules below, which
 * cannot see where such a password ends; the longest first (`byLength`). */
let known: string[] = [];

/** Remembers a password that messages must never show (as written, and percent-decoded). Very
 * short ones are left to the shape rules: replacing every "a" would garble every message. */
export function rememberSecret(secret: string): void {
  const forms = new Set([secret]);
  try {
    forms.add(decodeURIComponent(secret));
  } catch {
    // not percent-encoded
  }
  forms.add(encodeURIComponent(secret));
  for (const f of forms) if (f.length >= 3 && !known.includes(f)) known.push(f);
  // the newest kept (a process parses a URL or two; tests parse thousands)
  if (known.length > 64) known = known.slice(-64);
  byLength = [...known].sort((a, b) => b.length - a.length);
}

let byLength: string[] = [];

export function redactSecrets(text: string): string {
  let out = text;
  for (const s of byLength) if (out.includes(s)) out = out.split(s).join('***');
  return (
    out
      .replace(URL_TOKEN, (_m, scheme: string, rest: string) => `${scheme}${redactUserinfo(rest)}`)
      // `user:password@host` written without a scheme
      .replace(/(^|[\s"'=(])([A-Za-z0-9._-]+):(?!\/\/)(?!\*\*\*@)[^\s"'@]*@/g, '$1$2:***@')
      .replace(/(password\s*=\s*)('[^']*'|"[^"]*"|[^\s&;'"]+)/gi, '$1***')
  );
}

function redactUserinfo(rest: string): string {
  const at = rest.lastIndexOf('@');
  if (at < 0) return rest;
  const userinfo = rest.slice(0, at);
  const colon = userinfo.indexOf(':');
  const user = colon < 0 ? userinfo : userinfo.slice(0, colon);
  // a user part with no ':' and nothing odd in it holds no password
  if (colon < 0 && /^[A-Za-z0-9._-]*$/.test(user)) return rest;
  const shown = /^[A-Za-z0-9._-]+$/.test(user) ? `${user}:***` : '***';
  return `${shown}${rest.slice(at)}`;
}
