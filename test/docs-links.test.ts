/**
 * The documentation's relative links lead somewhere: every link in README.md,
 * docs/, examples/ and bench/ Markdown to a file of the repository names a
 * file that exists, and a `#fragment` names a heading of that page (GitHub's
 * anchors: lower case, punctuation dropped, spaces as dashes).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';

const REPO = path.resolve(__dirname, '..', '..');

/**
 * Pages that other pages may link to before they are added to the
 * repository: a link to one of them is checked only once the page exists.
 */
const ADDED_SEPARATELY = new Set<string>();

function markdownFiles(): string[] {
  const files = ['README.md'];
  for (const dir of ['docs', 'examples', 'bench']) {
    const abs = path.join(REPO, dir);
    if (!fs.existsSync(abs)) continue;
    for (const f of fs.readdirSync(abs)) if (f.endsWith('.md')) files.push(`${dir}/${f}`);
  }
  return files;
}

/** The lines of `text`, those of fenced code blocks blanked (so numbers stay). */
function prose(text: string): string[] {
  let fenced = false;
  return text.split('\n').map((line) => {
    if (/^\s*```/.test(line)) {
      fenced = !fenced;
      return '';
    }
    return fenced ? '' : line;
  });
}

/** GitHub's anchor for a heading's text. */
function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

function anchors(file: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of prose(fs.readFileSync(path.join(REPO, file), 'utf8'))) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

interface Link {
  from: string;
  line: number;
  target: string;
}

function links(file: string): Link[] {
  const out: Link[] = [];
  const lines = prose(fs.readFileSync(path.join(REPO, file), 'utf8'));
  lines.forEach((text, i) => {
    // Inline code is not a link.
    const plain = text.replace(/`[^`]*`/g, '');
    for (const m of plain.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
      out.push({ from: file, line: i + 1, target });
    }
  });
  return out;
}

test('slug follows GitHub: punctuation dropped, spaces as dashes', () => {
  assert.equal(slug('What a client gets (subscription semantics)'), 'what-a-client-gets-subscription-semantics');
  assert.equal(slug('Upstream TLS (`grpcs://`)'), 'upstream-tls-grpcs');
  assert.equal(slug('`xdstp-relay status`'), 'xdstp-relay-status');
  assert.equal(slug('Soak (`npm run soak`)'), 'soak-npm-run-soak');
});

test('every relative link in the documentation names an existing file and heading', () => {
  const files = markdownFiles();
  assert.ok(files.includes('docs/troubleshooting.md'), `the docs are where this test looks: ${files.join(', ')}`);
  const broken: string[] = [];
  let checked = 0;
  for (const file of files) {
    for (const link of links(file)) {
      const [rawPath, fragment] = link.target.split('#', 2) as [string, string | undefined];
      const target = rawPath === '' ? file : path.posix.normalize(path.posix.join(path.posix.dirname(file), decodeURI(rawPath)));
      const where = `${link.from}:${link.line}: ${link.target}`;
      if (target.startsWith('..')) {
        broken.push(`${where} (outside the repository)`);
        continue;
      }
      const abs = path.join(REPO, target);
      if (!fs.existsSync(abs)) {
        if (!ADDED_SEPARATELY.has(target)) broken.push(`${where} (no file ${target})`);
        continue;
      }
      checked++;
      if (fragment !== undefined && fragment !== '') {
        if (!target.endsWith('.md')) continue;
        if (!anchors(target).has(fragment)) broken.push(`${where} (no heading #${fragment} in ${target})`);
      }
    }
  }
  assert.ok(checked > 50, `only ${checked} links checked`);
  assert.deepEqual(broken, []);
});

test('README.md stays a front page that gives the test command and links the docs', () => {
  const readme = fs.readFileSync(path.join(REPO, 'README.md'), 'utf8');
  assert.ok(readme.split('\n').length <= 300, 'README.md is the front page; reference material belongs in docs/');
  assert.match(readme, /^## Tests\n\n```sh\nnpm test\n```$/m, 'CI runs exactly the test command README.md gives');
  assert.match(readme, /^npm ci && npm start$/m, 'the command that sets up and runs the relay on a fresh machine');
  for (const page of ['configuration', 'subscription-semantics', 'operations', 'troubleshooting', 'security', 'fleet', 'performance', 'upgrading']) {
    assert.ok(readme.includes(`](docs/${page}.md)`), `README.md links docs/${page}.md`);
  }
});
