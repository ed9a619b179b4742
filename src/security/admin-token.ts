import * as fs from 'node:fs';

/**
 * Reads the `--admin-token` file: the bearer token, surrounding whitespace
 * (a trailing newline, say) trimmed. Throws when the file is unreadable,
 * empty, or the token has characters a header cannot carry.
 */
export function readAdminToken(file: string): string {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
  }
  const token = text.trim();
  if (token === '') throw new Error(`${file}: the admin token file is empty`);
  if (!/^[\x21-\x7e]+$/.test(token)) throw new Error(`${file}: the admin token must be printable ASCII without spaces`);
  return token;
}
