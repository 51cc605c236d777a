// A word a POSIX shell reads back exactly (a generated completion script, a command wrapped in
// another shell by import-crontab).

/** `text` in single quotes, a quote inside written as '\''. */
export const shellQuote = (text: string): string => `'${text.replace(/'/g, `'\\''`)}'`;
