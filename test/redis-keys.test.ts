/** Key layout and connection-string parsing of the Redis store (no Redis needed). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RedisKeyLayout, hashTag, isDirectMember, isDirectMemberBytes, isGlobKey, membersEntry, parentGlobOf, parseEntry, recordEntry, tagOf, validatePrefix } from '../src/cache/redis-keys';
import { SLOTS, crc16, slotOfTag, tagOfSlot } from '../src/cache/redis-slots';
import { parseRedisSpec } from '../src/cache/redis-spec';

test('parent glob replaces the last id segment by * and keeps the context parameters', () => {
  assert.equal(parentGlobOf('xdstp://a/T/svc/x?p=1&q=2'), 'xdstp://a/T/svc/*?p=1&q=2');
  assert.equal(parentGlobOf('xdstp://a/T/x'), 'xdstp://a/T/*');
  assert.equal(parentGlobOf('xdstp://a/T'), 'xdstp://a/T/*');
  assert.equal(parentGlobOf('xdstp:///T/a%2Fb'), 'xdstp:///T/*', 'an encoded slash is part of the segment');
  assert.equal(parentGlobOf('xdstp://a/T/x/y?k=a/b'), 'xdstp://a/T/x/*?k=a/b', 'a slash in the query is not a segment');
  assert.equal(parentGlobOf('xdstp://a'), undefined);
  assert.equal(parentGlobOf('legacy:type.googleapis.com/x:name'), undefined);
});

test('glob keys are recognised by their * last segment', () => {
  assert.equal(isGlobKey('xdstp://a/T/svc/*?p=1'), true);
  assert.equal(isGlobKey('xdstp://a/T/*'), true);
  assert.equal(isGlobKey('xdstp://a/T/svc/x'), false);
  assert.equal(isGlobKey('legacy:T:*'), false);
});

test('a resource, its glob and its siblings share one hash tag; the tag never contains braces', () => {
  const glob = 'xdstp://a/T/{x}/*?n={}';
  assert.equal(tagOf('xdstp://a/T/{x}/m1?n={}'), tagOf(glob));
  assert.equal(tagOf('xdstp://a/T/{x}/m2?n={}'), tagOf(glob));
  assert.notEqual(tagOf('xdstp://a/T/{x}/m1?n=other'), tagOf(glob));
  assert.equal(tagOf('legacy:T:n'), hashTag('legacy:T:n'));
  assert.match(tagOf(glob), /^[0-9a-f]{16}$/);
});

test('key layout renders prefix, kind, tag and key, and parses resource keys back', () => {
  const k = new RedisKeyLayout('p:');
  const key = 'xdstp://a/T/{x}/m1';
  const t = tagOf(key);
  assert.equal(k.resource(key), `p:r:{${t}}:${key}`);
  assert.equal(k.members('xdstp://a/T/{x}/*'), `p:m:{${t}}:xdstp://a/T/{x}/*`);
  assert.equal(k.keyOfResource(k.resource(key)), key);
  assert.equal(k.keyOfResource(new RedisKeyLayout('p:r:').resource(key)), undefined);
  assert.equal(new RedisKeyLayout('a*[b]:').resourcePattern(), 'a\\*\\[b\\]:r:{????????????????}:*');
});

test('a prefix with braces is refused', () => {
  assert.throws(() => validatePrefix('relay{1}:'), /must not contain/);
  assert.doesNotThrow(() => validatePrefix('xdstp-relay:'));
});

test('connection strings: standalone, TLS, sentinel, cluster', () => {
  assert.deepEqual(parseRedisSpec('redis://h:6380/2'), { url: 'redis://h:6380/2' });
  assert.deepEqual(parseRedisSpec('rediss://:pw@h'), { url: 'rediss://:pw@h' });
  assert.deepEqual(parseRedisSpec('redis+sentinel://s%40cret@s1:26380,s2,[::1]:5000/mymaster/3'), {
    password: 's@cret',
    sentinel: {
      sentinels: [
        { host: 's1', port: 26380 },
        { host: 's2', port: 26379 },
        { host: '::1', port: 5000 },
      ],
      name: 'mymaster',
      db: 3,
    },
  });
  assert.deepEqual(parseRedisSpec('rediss+sentinel://user:pw@s1:1/m'), {
    username: 'user',
    password: 'pw',
    tls: true,
    sentinel: { sentinels: [{ host: 's1', port: 1 }], name: 'm' },
  });
  assert.deepEqual(parseRedisSpec('redis+cluster://n1:7000,n2:7001'), { cluster: ['n1:7000', 'n2:7001'] });
  assert.deepEqual(parseRedisSpec('n1:7000, n2:7001'), { cluster: ['n1:7000', 'n2:7001'] });
  assert.deepEqual(parseRedisSpec(['n1:7000']), { cluster: ['n1:7000'] });
  assert.throws(() => parseRedisSpec('redis+sentinel://s1:1'), /mastername/);
  assert.throws(() => parseRedisSpec('redis+sentinel://s1:1/m/x'), /mastername\[\/db\]/);
  assert.throws(() => parseRedisSpec('redis+cluster://n1:1/0'), /no path/);
  assert.throws(() => parseRedisSpec('memcached://x'), /unsupported/);
});

test('hash slots are computed as Redis Cluster does, and every slot has a short tag of its own', () => {
  // The cluster specification's check value: CRC16 (XMODEM) of "123456789" is 0x31C3.
  assert.equal(crc16('123456789'), 0x31c3);
  const seen = new Set<string>();
  for (let s = 0; s < SLOTS; s++) {
    const tag = tagOfSlot(s);
    assert.equal(slotOfTag(tag), s);
    assert.match(tag, /^[0-9a-z]{1,4}$/);
    seen.add(tag);
  }
  assert.equal(seen.size, SLOTS);
});

test('index entries name the Redis key they stand for and parse back; the shard of a tag is named after its slot', () => {
  const keys = new RedisKeyLayout('p:');
  const glob = 'xdstp://a/T/{x}/*?n={}';
  const tag = tagOf(glob);
  assert.equal(keys.keyOfEntry(membersEntry(glob, tag)), keys.members(glob));
  assert.equal(keys.keyOfEntry(recordEntry('legacy:T:n', tagOf('legacy:T:n'))), keys.resource('legacy:T:n'));
  assert.deepEqual(parseEntry(membersEntry(glob, tag)), { kind: 'm', tag, key: glob });
  assert.deepEqual(parseEntry(recordEntry('legacy:T:n', tag)), { kind: 'r', tag, key: 'legacy:T:n' });
  assert.equal(parseEntry('x:{0123456789abcdef}:k'), undefined);
  assert.equal(parseEntry('m:{short}:k'), undefined);
  assert.equal(keys.indexShardOfTag(tag), `p:i:{${tagOfSlot(slotOfTag(tag))}}`);
  assert.equal(keys.indexSlots, 'p:i:slots');
  assert.equal(keys.indexComplete, 'p:i:complete');
});

/** Globs and keys to judge membership of, each key against each glob: paths, queries, `/` and `?` in ids, UTF-8. */
const MEMBER_GLOBS = ['xdstp://a/T/svc/*?p=1&q=2', 'xdstp://a/T/*', 'xdstp://a/T/{x}/*?n={}', 'xdstp://a/T/x/*?k=a/b', 'xdstp://a/T/ü/*?c=é', 'xdstp://a/*', 'legacy:T:*'];
const MEMBER_KEYS = [
  'xdstp://a/T/svc/x?p=1&q=2',
  'xdstp://a/T/svc/x',
  'xdstp://a/T/svc/y/z?p=1&q=2',
  'xdstp://a/T/svc/?p=1&q=2',
  'xdstp://a/T/x',
  'xdstp://a/T',
  'xdstp://a/T/a%2Fb',
  'xdstp://a/T/{x}/m1?n={}',
  'xdstp://a/T/{x}/m?1?n={}',
  'xdstp://a/T/x/y?k=a/b',
  'xdstp://a/T/x/m?1?k=a/b',
  'xdstp://a/T/ü/ñ?c=é',
  'xdstp://a/T/ü/ñ?c=e',
  'xdstp://a/T/u/n?c=é',
  'xdstp://a/x',
  'legacy:T:n',
];

test('a direct member is recognised without building its parent glob, exactly as parentGlobOf decides', () => {
  for (const glob of MEMBER_GLOBS) for (const key of MEMBER_KEYS) assert.equal(isDirectMember(key, glob), parentGlobOf(key) === glob, `${key} in ${glob}`);
});

test('a direct member given as its UTF-8 bytes (a member set read back) is decided as its string is', () => {
  const check = (key: string, glob: string): void =>
    assert.equal(isDirectMemberBytes(Buffer.from(key, 'utf8'), glob), parentGlobOf(key) === glob, `${key} in ${glob}`);
  // Runs of one glob and alternating globs: the byte forms of the last glob are kept between calls.
  for (const glob of MEMBER_GLOBS) for (const key of MEMBER_KEYS) check(key, glob);
  for (const key of MEMBER_KEYS) for (const glob of MEMBER_GLOBS) check(key, glob);
});
