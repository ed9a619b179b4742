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

test('validate prints every problem with its path in the file and exits 2, as start would', T, async () => {
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
    assert.equal(res.code, 2, res.stdout + res.stderr);
    const lines = res.stdout.split('\n');
    assert.match(lines[0]!, /5 problems/);
    for (const pathAndWhat of [/^ {2}bogus: unknown option/, /^ {2}listen: /, /^ {2}authority\.bad: .*ftp:\/\/cp/, /^ {2}log-level: /, /^ {2}drain-period: /]) {
      assert.ok(lines.some((l) => pathAndWhat.test(l)), `${pathAndWhat}\n${res.stdout}`);
    }
    assert.doesNotMatch(res.stdout + res.stderr, /^\s+at /m, 'no stack trace');
  });
});

test('--validate checks flags (and env) the same way', T, async () => {
  const ok = await runCliToExit(['--validate', '--listen', '127.0.0.1:0', '--authority', 'a=grpc://cp:1']);
  assert.equal(ok.code, 0, ok.stderr);
  const bad = await runCliToExit(['--validate', '--authority', 'a=grpc://cp:1', '--shutdown-grace', 'soon'], { XDSTP_RELAY_LISTEN: 'nowhere' });
  assert.equal(bad.code, 2);
  assert.match(bad.stdout, /^ {2}listen: /m);
  assert.match(bad.stdout, /^ {2}shutdown-grace: /m);
});

test('validate reports a YAML syntax error and a missing file with the file name', T, async () => {
  await withFile('broken.yaml', 'listen: [\n', async (file) => {
    const res = await runCliToExit(['validate', '--config', file]);
    assert.equal(res.code, 2);
    assert.ok(res.stdout.includes(file), res.stdout);
    assert.match(res.stdout, /line \d+/);
  });
  const missing = await runCliToExit(['validate', '--config', '/nonexistent/relay.yaml']);
  assert.equal(missing.code, 2);
  assert.match(missing.stdout, /\/nonexistent\/relay\.yaml/);
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

/** The one JSON line a failed start (or validate) writes to stderr. */
function invalidLine(stderr: string): { level: number; msg: string; problems: Array<{ path: string; message: string }> } {
  const lines = stderr.split('\n').filter((l) => l.trim() !== '');
  assert.equal(lines.length, 1, stderr);
  return JSON.parse(lines[0]!) as { level: number; msg: string; problems: Array<{ path: string; message: string }> };
}

test('validate fails the way start does: the same JSON line on stderr and exit 2', T, async () => {
  const args = ['--listen', 'nowhere', '--authority', 'a=grpc://cp:1', '--admin', '127.0.0.1:0'];
  const started = await runCliToExit(args);
  const validated = await runCliToExit(['validate', ...args]);
  assert.equal(started.code, 2, started.stderr);
  assert.equal(validated.code, 2, validated.stderr);
  assert.deepEqual(invalidLine(validated.stderr).problems, invalidLine(started.stderr).problems);
  assert.equal(invalidLine(validated.stderr).msg, invalidLine(started.stderr).msg);
});

test('a file:// authority whose directory is missing fails validate and start alike', T, async () => {
  const dir = path.join(os.tmpdir(), `xdstp-relay-missing-${process.pid}-${Date.now()}`);
  const args = ['--authority', `d=file://${dir}`, '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0'];
  const validated = await runCliToExit(['validate', ...args]);
  assert.equal(validated.code, 2, validated.stdout + validated.stderr);
  assert.match(invalidLine(validated.stderr).problems[0]!.message, new RegExp(`no directory ${dir}`));
  const started = await runCliToExit(args);
  assert.equal(started.code, 2, started.stdout + started.stderr);
  assert.equal(invalidLine(started.stderr).problems[0]!.path, 'authority[0]');
});

test('a configuration file with no upstream at all is refused by validate and start', T, async () => {
  await withFile('relay.yaml', 'listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\n', async (file) => {
    const validated = await runCliToExit(['validate', '--config', file]);
    assert.equal(validated.code, 2, validated.stdout + validated.stderr);
    assert.match(validated.stdout, /no upstream/);
    const started = await runCliToExit(['--config', file]);
    assert.equal(started.code, 2, started.stdout + started.stderr);
    assert.deepEqual(invalidLine(started.stderr).problems.map((p) => p.path), ['authority']);
  });
});

test('an unreadable admin-token file fails validate and start alike', T, async () => {
  const args = ['--authority', 'a=grpc://cp:1', '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0', '--admin-token', '/nonexistent/token'];
  const validated = await runCliToExit(['validate', ...args]);
  const started = await runCliToExit(args);
  assert.equal(validated.code, 2);
  assert.equal(started.code, 2);
  assert.deepEqual(invalidLine(validated.stderr).problems, invalidLine(started.stderr).problems);
  assert.equal(invalidLine(started.stderr).problems[0]!.path, 'admin-token');
});
