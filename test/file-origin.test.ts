/**
 * A directory as the origin of an authority (`--authority a=file://DIR`): what
 * a subscribed client sees when files are added, changed, broken and deleted.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as path from 'node:path';
import type { DeltaDiscoveryResponse } from '../src/proto/messages';
import { envoyTypes } from '../src/typed-json/envoy-types';
import { assertWellFormed } from './support/assertions';
import {
  cluster,
  entry,
  listener,
  removeFile,
  resourcesFile,
  tempDir,
  withFileRelay,
  writeAtomic,
  writeFile,
} from './support/files';
import { CLUSTER, LISTENER, LISTENER_COLLECTION, TTL_FEATURE, xdstp } from './support/names';

const T = { timeout: 20_000 };
const L = (rest: string): string => xdstp('a', LISTENER, rest);
const C = (rest: string): string => xdstp('a', CLUSTER, rest);

const names = (r: DeltaDiscoveryResponse): string[] => (r.resources ?? []).map((x) => x.name ?? '').sort();
const removed = (r: DeltaDiscoveryResponse): string[] => [...(r.removed_resources ?? [])].sort();

test('file edits reach a subscribed client as exactly the delta', T, async () => {
  const dir = tempDir();
  writeFile(dir, 'edge.yaml', resourcesFile(entry(L('edge/one'), listener(L('edge/one'), 1001)), entry(L('edge/two'), listener(L('edge/two'), 1002))));
  await withFileRelay({ a: dir }, async ({ client }) => {
    const c = client();
    c.subscribe(LISTENER, [L('edge/*')]);
    const initial = await c.nextResponse();
    assert.deepEqual(names(initial), [L('edge/one'), L('edge/two')]);
    const oneVersion = c.held(LISTENER).get(L('edge/one'));

    // Change one of the two: only that one is sent again.
    writeFile(dir, 'edge.yaml', resourcesFile(entry(L('edge/one'), listener(L('edge/one'), 1001)), entry(L('edge/two'), listener(L('edge/two'), 2002))));
    const changed = await c.nextResponse();
    assert.deepEqual(names(changed), [L('edge/two')]);
    assert.deepEqual(removed(changed), []);
    assert.equal(c.held(LISTENER).get(L('edge/one')), oneVersion);

    // A new file (in a subdirectory) adds its resource, nothing else.
    writeAtomic(dir, 'more/three.yaml', `name: ${L('edge/three')}\nresource: ${JSON.stringify(listener(L('edge/three'), 1003))}\n`);
    const added = await c.nextResponse();
    assert.deepEqual(names(added), [L('edge/three')]);
    assert.deepEqual(removed(added), []);

    // Deleting a file removes exactly its resources.
    removeFile(dir, 'edge.yaml');
    const gone = await c.nextResponse();
    assert.deepEqual(names(gone), []);
    assert.deepEqual(removed(gone), [L('edge/one'), L('edge/two')]);

    // The last member going away empties the glob: the glob URL is in removed_resources.
    removeFile(dir, 'more/three.yaml');
    const empty = await c.nextResponse();
    assert.ok(removed(empty).includes(L('edge/three')), JSON.stringify(empty));
    assert.ok(removed(empty).includes(L('edge/*')), JSON.stringify(empty));
    assert.deepEqual([...c.held(LISTENER).keys()], []);
    assertWellFormed(c);
  });
});

test('a broken file is rejected with a log line and its last good version keeps being served', T, async () => {
  const dir = tempDir();
  const good = (version: string, timeout: string): string =>
    resourcesFile(entry(C('web'), cluster(C('web'), timeout), { version }), entry(C('api'), cluster(C('api')), { version }));
  writeFile(dir, 'clusters.yaml', good('1', '1s'));
  await withFileRelay({ a: dir }, async ({ client, log }) => {
    const c = client();
    c.subscribe(CLUSTER, [C('web')]);
    const first = await c.nextResponse();
    assert.deepEqual(names(first), [C('web')]);
    assert.equal(first.resources?.[0]?.version, '1');

    const rejected = (from: number, reason: RegExp, resource?: string) =>
      log.waitFor(
        (l) => l.msg?.startsWith('file rejected') === true && l.file === 'clusters.yaml' && reason.test(String(l.reason)) && (resource === undefined || l.resource === resource),
        `clusters.yaml rejected (${reason})`,
        from,
      );

    // A YAML syntax error.
    let mark = log.lines.length;
    writeFile(dir, 'clusters.yaml', 'resources:\n  - name: [unterminated\n');
    const yamlError = await rejected(mark, /YAML/);
    assert.ok(Number(yamlError.servingLastGood) === 2, JSON.stringify(yamlError));

    // An unknown payload type, named with the resource it belongs to.
    mark = log.lines.length;
    writeFile(dir, 'clusters.yaml', resourcesFile(entry(C('web'), { ...cluster(C('web')), '@type': 'type.googleapis.com/envoy.config.cluster.v3.Clusterr' }), entry(C('api'), cluster(C('api')))));
    await rejected(mark, /unknown type envoy\.config\.cluster\.v3\.Clusterr/, C('web'));

    // A misspelt field.
    mark = log.lines.length;
    const typo = { ...cluster(C('api')), conect_timeout: '1s' };
    writeFile(dir, 'clusters.yaml', resourcesFile(entry(C('web'), cluster(C('web'))), entry(C('api'), typo)));
    await rejected(mark, /unknown field "conect_timeout"/, C('api'));

    // A bad value of a well-known type.
    mark = log.lines.length;
    writeFile(dir, 'clusters.yaml', resourcesFile(entry(C('web'), cluster(C('web'), 'five seconds')), entry(C('api'), cluster(C('api')))));
    await rejected(mark, /duration/, C('web'));

    // Nothing was removed: a new client still gets the last good version.
    const late = client();
    late.subscribe(CLUSTER, [C('web'), C('api')]);
    await late.waitForVersion(CLUSTER, C('web'), '1');
    await late.waitForVersion(CLUSTER, C('api'), '1');

    // The fix arrives as the next response, and it is the only thing that did.
    mark = log.lines.length;
    writeFile(dir, 'clusters.yaml', good('2', '2s'));
    const fixed = await c.nextResponse();
    assert.deepEqual(names(fixed), [C('web')]);
    assert.equal(fixed.resources?.[0]?.version, '2');
    assert.deepEqual(removed(fixed), []);
    await log.waitFor((l) => l.msg === 'file accepted again' && l.file === 'clusters.yaml', 'file accepted again', mark);
    assertWellFormed(c, late);
  });
});

test('glob members are selected by context parameters; names are canonicalized', T, async () => {
  const dir = tempDir();
  // Written with parameters out of order and an escapable character: served canonically.
  writeFile(
    dir,
    'listeners.yaml',
    resourcesFile(
      entry(L('mesh/http?zone=z1&node_type=ingress'), listener('http', 80)),
      entry(L('mesh/db?node_type=ingress&zone=z1'), listener('db', 5432)),
      entry(L('mesh/out?node_type=egress&zone=z1'), listener('out', 15001)),
      entry(L('mesh/a~b?node_type=ingress'), listener('tilde', 81)),
    ),
  );
  await withFileRelay({ a: dir }, async ({ client }) => {
    const ingress = client();
    ingress.subscribe(LISTENER, [L('mesh/*?zone=z1&node_type=ingress')]);
    const got = await ingress.nextResponse();
    assert.deepEqual(names(got), [L('mesh/db?node_type=ingress&zone=z1'), L('mesh/http?node_type=ingress&zone=z1')]);

    const egress = client();
    egress.subscribe(LISTENER, [L('mesh/*?node_type=egress&zone=z1')]);
    assert.deepEqual(names(await egress.nextResponse()), [L('mesh/out?node_type=egress&zone=z1')]);

    const single = client();
    single.subscribe(LISTENER, [L('mesh/a%7eb?node_type=ingress')]);
    const one = await single.nextResponse();
    // A singleton comes back in the client's own spelling.
    assert.deepEqual(names(one), [L('mesh/a%7eb?node_type=ingress')]);
    assertWellFormed(ingress, egress, single);
  });
});

test('a list collection is served as one resource with its inline entries', T, async () => {
  const dir = tempDir();
  const name = xdstp('a', LISTENER_COLLECTION, 'edge?tier=public');
  writeFile(
    dir,
    'collections/edge.yaml',
    [
      `name: ${name}`,
      'resource:',
      '  "@type": type.googleapis.com/envoy.config.listener.v3.ListenerCollection',
      '  entries:',
      '    - inline_entry:',
      '        name: http',
      '        version: "1"',
      `        resource: ${JSON.stringify(listener('http', 8080))}`,
      '    - inline_entry:',
      '        name: health',
      '        version: "3"',
      `        resource: ${JSON.stringify(listener('health', 8081))}`,
      '    - locator: xdstp://a/envoy.config.listener.v3.Listener/elsewhere',
      '',
    ].join('\n'),
  );
  await withFileRelay({ a: dir }, async ({ client }) => {
    const c = client();
    c.subscribe(LISTENER_COLLECTION, [name]);
    const resp = await c.nextResponse();
    assert.deepEqual(names(resp), [name]);
    const any = resp.resources?.[0]?.resource;
    assert.ok(any);
    assert.equal(any.type_url, LISTENER_COLLECTION);
    const decoded = envoyTypes().decodeAny(any.type_url, any.value) as { entries: Array<Record<string, { name?: string; version?: string; resource?: { '@type': string; name: string } }>> };
    assert.deepEqual(
      decoded.entries.map((e) => e.inline_entry?.name ?? e.locator),
      ['http', 'health', 'xdstp://a/envoy.config.listener.v3.Listener/elsewhere'],
    );
    assert.equal(decoded.entries[1]?.inline_entry?.version, '3');
    assert.equal(decoded.entries[0]?.inline_entry?.resource?.['@type'], 'type.googleapis.com/envoy.config.listener.v3.Listener');
    assert.equal(decoded.entries[0]?.inline_entry?.resource?.name, 'http');

    // Another parameter set is another (absent) collection.
    c.subscribe(LISTENER_COLLECTION, [xdstp('a', LISTENER_COLLECTION, 'edge?tier=private')]);
    await c.waitForRemoved(LISTENER_COLLECTION, xdstp('a', LISTENER_COLLECTION, 'edge?tier=private'));
    assertWellFormed(c);
  });
});

test('after the last client leaves, a new subscriber gets the whole glob again, edits included', T, async () => {
  const dir = tempDir();
  writeFile(dir, 'l.yaml', resourcesFile(entry(L('re/one'), listener('one', 1)), entry(L('re/two'), listener('two', 2))));
  await withFileRelay({ a: dir }, async ({ client, log }) => {
    const first = client();
    first.subscribe(LISTENER, [L('re/*')]);
    await first.waitFor(() => first.held(LISTENER).size === 2, 'both members');
    first.unsubscribe(LISTENER, [L('re/*')]);
    first.close();
    // Changed while nobody subscribes: nothing to send, but the next subscriber sees it.
    const mark = log.lines.length;
    writeFile(dir, 'l.yaml', resourcesFile(entry(L('re/one'), listener('one', 1)), entry(L('re/two'), listener('two', 22))));
    await log.waitFor((l) => l.msg === 'file origin updated' && (l.changed as string[]).includes('l.yaml'), 'l.yaml reloaded', mark);
    const second = client();
    second.subscribe(LISTENER, [L('re/*')]);
    const resp = await second.nextResponse();
    assert.deepEqual(names(resp), [L('re/one'), L('re/two')]);
    const payload = second.resource(LISTENER, L('re/two'))!.resource!;
    const decoded = envoyTypes().decodeAny(payload.type_url, payload.value) as { address?: { socket_address?: { port_value?: number } } };
    assert.equal(decoded.address?.socket_address?.port_value, 22);
    assertWellFormed(second);
  });
});

test('a missing resource and an empty glob are answered in removed_resources, then filled in by a new file', T, async () => {
  const dir = tempDir();
  await withFileRelay({ a: dir }, async ({ client }) => {
    const c = client();
    c.subscribe(CLUSTER, [C('later'), C('pool/*')]);
    await c.waitForRemoved(CLUSTER, C('later'));
    await c.waitForRemoved(CLUSTER, C('pool/*'));
    writeAtomic(dir, 'new.json', resourcesFile(entry(C('later'), cluster(C('later'))), entry(C('pool/p1'), cluster(C('pool/p1')))));
    await c.waitFor(() => c.held(CLUSTER).has(C('later')) && c.held(CLUSTER).has(C('pool/p1')), 'both resources');
    assertWellFormed(c);
  });
});

test('a resource with a ttl carries it and is kept alive by heartbeats while its file holds it', T, async () => {
  const dir = tempDir();
  writeFile(dir, 'ttl.yaml', `name: ${C('short')}\nversion: v1\nttl: 1s\nresource: ${JSON.stringify(cluster(C('short')))}\n`);
  await withFileRelay({ a: dir }, async ({ client }) => {
    const aware = client({ clientFeatures: [TTL_FEATURE] });
    const plain = client();
    aware.subscribe(CLUSTER, [C('short')]);
    plain.subscribe(CLUSTER, [C('short')]);
    await aware.waitForVersion(CLUSTER, C('short'), 'v1');
    await plain.waitForVersion(CLUSTER, C('short'), 'v1');
    const full = aware.resource(CLUSTER, C('short'));
    assert.equal(Number(full?.ttl?.seconds), 1);
    assert.equal(plain.resource(CLUSTER, C('short'))?.ttl, undefined, 'no ttl for a client that does not support it');
    // Two heartbeats (no payload, same version): the resource outlives its ttl.
    await aware.waitFor(() => aware.received(CLUSTER, C('short')).filter((r) => !r.resource && r.version === 'v1').length >= 2, 'two heartbeats', 8000);
    assert.equal(aware.held(CLUSTER).get(C('short')), 'v1');
    assert.equal(plain.held(CLUSTER).get(C('short')), 'v1');
    assert.deepEqual(aware.removedNames(CLUSTER), []);
    assertWellFormed(aware, plain);
  });
});

test('resources naming another authority, or a type other than their payload, reject their file', T, async () => {
  const dir = tempDir();
  writeFile(dir, 'ok.yaml', resourcesFile(entry(C('ok'), cluster(C('ok')))));
  writeFile(dir, 'foreign.yaml', resourcesFile(entry(xdstp('b', CLUSTER, 'x'), cluster('x')), entry(C('also-in-foreign'), cluster('y'))));
  writeFile(dir, 'mismatch.yaml', resourcesFile(entry(L('not-a-cluster'), cluster('z'))));
  await withFileRelay({ a: dir }, async ({ client, log }) => {
    const foreign = log.find((l) => l.file === 'foreign.yaml');
    assert.ok(foreign && /authority "b"/.test(String(foreign.reason)), JSON.stringify(log.lines));
    const mismatch = log.find((l) => l.file === 'mismatch.yaml');
    assert.ok(mismatch && /does not match/.test(String(mismatch.reason)), JSON.stringify(log.lines));
    const c = client();
    c.subscribe(CLUSTER, [C('ok'), C('also-in-foreign')]);
    await c.waitFor(() => c.held(CLUSTER).has(C('ok')), 'the good file\'s cluster');
    await c.waitForRemoved(CLUSTER, C('also-in-foreign'));
    assertWellFormed(c);
  });
});

test('a default-upstream directory serves legacy names, wildcard included, from base64 Any payloads', T, async () => {
  const dir = tempDir();
  const payload = Buffer.from('opaque-cluster-bytes');
  const raw = (name: string): Record<string, unknown> => ({ name, resource: { type_url: CLUSTER, value: payload.toString('base64') } });
  writeFile(dir, path.join('legacy', 'clusters.yaml'), resourcesFile(raw('backend'), raw('frontend')));
  const xdsDir = tempDir();
  await withFileRelay(
    { a: xdsDir },
    async ({ client }) => {
      const c = client();
      c.subscribe(CLUSTER, ['*']);
      await c.waitFor(() => c.held(CLUSTER).size === 2, 'both legacy clusters');
      assert.deepEqual([...c.held(CLUSTER).keys()].sort(), ['backend', 'frontend']);
      assert.deepEqual(Buffer.from(c.resource(CLUSTER, 'backend')!.resource!.value), payload, 'the Any bytes pass through untouched');
      const one = client();
      one.subscribe(CLUSTER, ['frontend', 'nope']);
      await one.waitForRemoved(CLUSTER, 'nope');
      await one.waitFor(() => one.held(CLUSTER).has('frontend'), 'frontend');
      assertWellFormed(c, one);
    },
    { defaultUpstreamDir: dir },
  );
});
