/**
 * `xdstp-relay validate --config FILE` / `--validate`: every problem with its
 * path, exit 0 only for a valid configuration, and nothing is started.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { runCliToExit } from './support/cli';

const T = { timeout: 20_000 };

function withFile(name: string, text: string, body: (file: string) => Promise<void>): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'xdstp-relay-validate-'));
  const file = path.join(dir, name);
  fs.writeFileSync(file, text);
  return body(file).finally(() => fs.rmSync(dir, { recursive: true, force: true }));
}

test('validate accepts a valid configuration file and exits 0 without starting', T, async () => {
  const config = ['listen: 127.0.0.1:18000', 'admin: 127.0.0.1:9901', 'authority:', '  a: grpc://cp.example:18000', 'drain-period: 5000', ''].join('\n');
  await withFile('relay.yaml', config, async (file) => {
    const res = await runCliToExit(['validate', '--config', file]);
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /valid/);
    assert.doesNotMatch(res.stdout + res.stderr, /relay listening/);
  });
});

test('validate prints every problem with its path in the file and exits 1', T, async () => {
  const config = [
    'listen: 1.2.3.4:99999',
    'bogus: 1',
    'authority:',
    '  good: grpc://cp:1',
    '  bad: ftp://cp',
    'log-level: loud',
    'drain-period: -5',
    '',
  ].join('\n');
  await withFile('relay.yaml', config, async (file) => {
    const res = await runCliToExit(['validate', '--config', file]);
    assert.equal(res.code, 1, res.stdout + res.stderr);
    const lines = res.stderr.split('\n');
    assert.match(lines[0]!, /5 problems/);
    for (const pathAndWhat of [/^ {2}bogus: unknown option/, /^ {2}listen: /, /^ {2}authority\.bad: .*ftp:\/\/cp/, /^ {2}log-level: /, /^ {2}drain-period: /]) {
      assert.ok(lines.some((l) => pathAndWhat.test(l)), `${pathAndWhat}\n${res.stderr}`);
    }
    assert.doesNotMatch(res.stderr, /^\s+at /m, 'no stack trace');
  });
});

test('--validate checks flags (and env) the same way', T, async () => {
  const ok = await runCliToExit(['--validate', '--listen', '127.0.0.1:0', '--authority', 'a=grpc://cp:1']);
  assert.equal(ok.code, 0, ok.stderr);
  const bad = await runCliToExit(['--validate', '--authority', 'a=grpc://cp:1', '--shutdown-grace', 'soon'], { XDSTP_RELAY_LISTEN: 'nowhere' });
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /^ {2}listen: /m);
  assert.match(bad.stderr, /^ {2}shutdown-grace: /m);
});

test('validate reports a YAML syntax error and a missing file with the file name', T, async () => {
  await withFile('broken.yaml', 'listen: [\n', async (file) => {
    const res = await runCliToExit(['validate', '--config', file]);
    assert.equal(res.code, 1);
    assert.ok(res.stderr.includes(file), res.stderr);
    assert.match(res.stderr, /line \d+/);
  });
  const missing = await runCliToExit(['validate', '--config', '/nonexistent/relay.yaml']);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /\/nonexistent\/relay\.yaml/);
});

test('an invalid configuration at start is one JSON log line listing every problem', T, async () => {
  const res = await runCliToExit(['--listen', 'nowhere', '--authority', 'nonsense']);
  assert.equal(res.code, 2);
  const lines = res.stderr.split('\n').filter((l) => l.trim() !== '');
  assert.equal(lines.length, 1, res.stderr);
  const line = JSON.parse(lines[0]!) as { level: number; msg: string; problems: Array<{ path: string }> };
  assert.equal(line.level, 50);
  assert.match(line.msg, /^invalid configuration/);
  assert.deepEqual(line.problems.map((p) => p.path).sort(), ['authority[0]', 'listen']);
});
