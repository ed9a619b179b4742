/**
 * The shared tier's wire pieces on their own: the record a resource is
 * stored as (src/cache/redis-record.ts), the commands written in place
 * (src/cache/resp.ts) and a chunk's commands (src/cache/redis-write-batch.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ABSENT_RECORD, StringTable, decodeRecord, encodeRecord, isAbsentRecord, recordSize } from '../src/cache/redis-record';
import { BufferPool, RespCommand } from '../src/cache/resp';
import { RedisKeyLayout, tagOf } from '../src/cache/redis-keys';
import { slotOfTag } from '../src/cache/redis-slots';
import { WriteBatch, type Entry } from '../src/cache/redis-write-batch';

test('a record decodes to the resource it was encoded from, bytes untouched', () => {
  const resource = Buffer.from([0xff, 0x00, 0x80, 0xc3, 0x28]);
  const r = { key: 'k', typeUrl: 'type.googleapis.com/x.Y', version: 'v-ü', resource, glob: 'xdstp://a/x.Y/p/*', expiresAt: 1_900_000_000_123 };
  const b = encodeRecord(r);
  assert.equal(b.length, recordSize(r));
  assert.deepEqual(decodeRecord('k', b), r);
  const plain = { key: 'k', typeUrl: 'T', version: '', resource: Buffer.alloc(0) };
  assert.deepEqual(decodeRecord('k', encodeRecord(plain)), plain, 'empty version and bytes, no glob, no TTL');
});

test('bytes that are not a record (another format, truncated, a plain string) decode to undefined', () => {
  const b = encodeRecord({ key: 'k', typeUrl: 'T', version: 'v1', resource: Buffer.from('abc') });
  assert.equal(decodeRecord('k', Buffer.from('1')), undefined);
  assert.equal(decodeRecord('k', b.subarray(0, 10)), undefined);
  const other = Buffer.from(b);
  other[0] = 2;
  assert.equal(decodeRecord('k', other), undefined);
  const lying = Buffer.from(b);
  lying.writeUInt32BE(1000, 1); // version length beyond the end
  assert.equal(decodeRecord('k', lying), undefined);
});

test('records decoded with a string table share equal type URLs and globs, and decode the same', () => {
  const strings = new StringTable(2); // tiny: also exercises clearing
  const rec = (i: number, glob: string, typeUrl = 'type.googleapis.com/x.Y'): Buffer =>
    encodeRecord({ key: `k${i}`, typeUrl, version: `v${i}`, resource: Buffer.from([i]), glob });
  const globs = ['xdstp://a/x.Y/p/*', 'xdstp://a/x.Y/q/*', 'xdstp://a/x.Y/p/*?c=ü', 'xdstp://a/x.Y/q/*'];
  globs.forEach((g, i) => {
    const b = rec(i, g);
    const r = decodeRecord(`k${i}`, b, strings)!;
    assert.deepEqual(r, decodeRecord(`k${i}`, b), 'same result as without a table');
    assert.equal(r.glob, g);
  });
  const a = decodeRecord('k', rec(7, 'xdstp://a/x.Y/r/*'), strings)!;
  const b = decodeRecord('k', rec(8, 'xdstp://a/x.Y/r/*'), strings)!;
  assert.equal(a.glob, b.glob);
  assert.equal(decodeRecord('k', rec(9, 'xdstp://a/x.Y/s/*', 'T2'), strings)!.typeUrl, 'T2');
  const noGlob = decodeRecord('k', encodeRecord({ key: 'k', typeUrl: 'T', version: '', resource: Buffer.alloc(0) }), strings)!;
  assert.equal(noGlob.glob, undefined);
});

test('records decoded one after another with a string table keep their own versions, equal or not to the one before', () => {
  const strings = new StringTable();
  const versions = ['v1', 'v1', 'v2', 'v10', 'v1', '', '', 'ü1', 'ü2', 'ü2', 'x'.repeat(300), 'x'.repeat(299) + 'y', 'v1'];
  // Each record in a buffer of its own, and several in one buffer (as records of one reply are).
  const shared = Buffer.concat(versions.map((v, i) => encodeRecord({ key: `k${i}`, typeUrl: 'T', version: v, resource: Buffer.from([i]) })));
  let at = 0;
  versions.forEach((v, i) => {
    const own = encodeRecord({ key: `k${i}`, typeUrl: 'T', version: v, resource: Buffer.from([i]) });
    assert.equal(decodeRecord(`k${i}`, own, strings)!.version, v);
    const inShared = shared.subarray(at, at + own.length);
    at += own.length;
    assert.equal(decodeRecord(`k${i}`, inShared, strings)!.version, v);
  });
});

test('a glob the caller expects decodes to itself, and a record naming another glob still decodes to its own', () => {
  const strings = new StringTable();
  const rec = (glob: string): Buffer => encodeRecord({ key: 'k', typeUrl: 'T', version: 'v', resource: Buffer.alloc(1), glob });
  strings.expect('xdstp://a/T/p/*');
  assert.equal(decodeRecord('k', rec('xdstp://a/T/p/*'), strings)!.glob, 'xdstp://a/T/p/*');
  assert.equal(decodeRecord('k', rec('xdstp://a/T/q/*'), strings)!.glob, 'xdstp://a/T/q/*');
  assert.equal(decodeRecord('k', rec('xdstp://a/T/p/?'), strings)!.glob, 'xdstp://a/T/p/?', 'same length, other bytes');
  assert.equal(decodeRecord('k', rec('xdstp://a/T/p/*'), strings)!.glob, 'xdstp://a/T/p/*');
});

test('the absent marker is one byte 2: never a record, and no record is a marker', () => {
  assert.deepEqual(ABSENT_RECORD, Buffer.from([2]));
  assert.ok(isAbsentRecord(Buffer.from([2])));
  assert.equal(decodeRecord('k', ABSENT_RECORD), undefined);
  assert.ok(!isAbsentRecord(encodeRecord({ key: 'k', typeUrl: '', version: '', resource: Buffer.alloc(0) })));
  assert.ok(!isAbsentRecord(Buffer.from('1')), "the old separate marker's value");
});

test('a command written in place is the RESP array of its name and arguments', () => {
  const pool = new BufferPool();
  const cmd = new RespCommand('mset', pool, 4); // tiny: forces the buffer to grow
  cmd.string('key:é');
  cmd.string('');
  const long = 'x'.repeat(1234);
  cmd.string(long);
  const wire = cmd.finish().toWritable({});
  assert.equal(wire.toString('utf8'), `*4\r\n$4\r\nmset\r\n$6\r\nkey:é\r\n$0\r\n\r\n$1234\r\n${long}\r\n`);
});

/** The commands of a finished write group, as [name, ...args] strings (RESP arrays of bulk strings). */
function commandsOf(batch: WriteBatch): string[][] {
  const out: string[][] = [];
  for (const g of batch.groups.values()) {
    const { commands, release } = batch.finish(g);
    for (const c of commands) {
      const wire = c.toWritable({}).toString('latin1');
      const args: string[] = [];
      let pos = wire.indexOf('\r\n') + 2;
      while (pos < wire.length) {
        const end = wire.indexOf('\r\n', pos);
        const len = Number(wire.slice(pos + 1, end));
        args.push(wire.slice(end + 2, end + 2 + len));
        pos = end + 2 + len + 2;
      }
      out.push(args);
    }
    release();
  }
  return out;
}

test('a glob marked absent between two runs of its members splits the batch, in order', () => {
  const keys = new RedisKeyLayout('p:');
  const batch = new WriteBatch(keys, false, new BufferPool());
  const glob = 'xdstp://a/T/g/*';
  const put = (id: string): Entry => {
    const key = `xdstp://a/T/g/${id}`;
    return { kind: 'put', key, res: { key, typeUrl: 'T', version: 'v', resource: Buffer.from(id), glob } };
  };
  for (const e of [put('m1'), put('m2'), { kind: 'absent', key: glob } as Entry, put('m3'), put('m4')]) batch.add(e);
  const m = keys.members(glob);
  const r = (k: string): string => keys.resource(k);
  // (MSET: keys only; EVAL of the index upkeep: without its script text.)
  const shape = commandsOf(batch).map(([name, ...args]) => [name, ...args.filter((_, i) => (name !== 'mset' || i % 2 === 0) && (name !== 'eval' || i > 0))]);
  const tag = tagOf(glob);
  const shard = keys.indexShardOfTag(tag);
  const entry = `m:{${tag}}:${glob}`;
  assert.deepEqual(shape, [
    ['del', r(glob)],
    ['mset', r('xdstp://a/T/g/m1'), r('xdstp://a/T/g/m2')],
    ['sadd', m, 'xdstp://a/T/g/m1', 'xdstp://a/T/g/m2'],
    ['eval', '1', shard, '1', entry],
    ['sadd', keys.indexSlots, String(slotOfTag(tag))],
    ['del', m],
    ['mset', r(glob)],
    ['eval', '1', shard, '0', entry],
    ['del', r(glob)],
    ['mset', r('xdstp://a/T/g/m3'), r('xdstp://a/T/g/m4')],
    ['sadd', m, 'xdstp://a/T/g/m3', 'xdstp://a/T/g/m4'],
    ['eval', '1', shard, '1', entry],
  ]);
});
