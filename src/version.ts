import * as fs from 'node:fs';
import * as path from 'node:path';

let cached: string | undefined;

/**
 * The relay's version, from the package.json shipped beside dist/ (the image
 * copies it). Read from the file, not npm's environment: a container starts
 * `node dist/src/cli.js` without npm, and npm would report whichever package
 * it was run from.
 */
export function relayVersion(): string {
  if (cached !== undefined) return cached;
  // dist/src/version.js → the package root (two levels up from dist/src).
  for (const dir of [path.resolve(__dirname, '..', '..'), path.resolve(__dirname, '..')]) {
    try {
      const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: unknown; version?: unknown };
      if (pkg.name === 'xdstp-relay' && typeof pkg.version === 'string') return (cached = pkg.version);
    } catch {
      // Not here: try the next candidate.
    }
  }
  return (cached = 'unknown');
}
