/**
 * The ACK ledger alone (src/downstream/ack-ledger.ts): what a client was
 * sent, what it holds before and after it answers, what it NACKed, and which
 * response a state-of-the-world client reports for each resource. No gRPC,
 * no engine: responses are built here the way the per-client state records
 * them (note the prior version, change `held`, then send).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { makeVariant } from '../src/cache/memory-cache';
import { AckLedger } from '../src/downstream/ack-ledger';
import { TOLD_ABSENT, type OutgoingResponse } from '../src/downstream/outgoing';

const TYPE = 'type.googleapis.com/envoy.config.listener.v3.Listener';

/** Records and sends one response: `adds` as [name, version], `removes` told absent. */
function send(ledger: AckLedger, nonce: string, adds: Array<[string, string]>, removes: string[] = []): OutgoingResponse {
  for (const [name, version] of adds) {
    ledger.notePrior(name, ledger.held.get(name));
    ledger.held.set(name, version);
  }
  for (const name of removes) {
    ledger.notePrior(name, ledger.held.get(name));
    ledger.held.set(name, TOLD_ABSENT);
  }
  const response: OutgoingResponse = {
    typeUrl: TYPE,
    nonce,
    bytes: Buffer.alloc(0),
    framed: Buffer.alloc(5),
    adds: adds.map(([name, version]) => makeVariant(name, name, version, Buffer.alloc(0))),
    removes,
  };
  ledger.sent(response);
  return response;
}

test('ledger: an ACK settles the response it names and every earlier one, not the later ones', () => {
  const ledger = new AckLedger(false);
  send(ledger, 'n1', [['a', 'v1']]);
  send(ledger, 'n2', [['b', 'v1']]);
  send(ledger, 'n3', [['c', 'v1']]);
  assert.equal(ledger.lastNonce, 'n3');
  assert.equal(ledger.ack('n2'), true);
  assert.deepEqual(ledger.unacked.map((r) => r.nonce), ['n3']);
  assert.equal(ledger.ack('unknown'), false, 'a nonce never sent settles nothing');
  assert.deepEqual(ledger.unacked.map((r) => r.nonce), ['n3']);
  assert.equal(ledger.ack('n3'), true);
  assert.equal(ledger.unacked.length, 0);
});

test('ledger: until the client ACKs a change it is seen holding its previous version; a first delivery is found in flight', () => {
  const ledger = new AckLedger(false);
  send(ledger, 'n1', [['a', 'v1']]);
  assert.equal(ledger.answered('a'), undefined, 'nothing held before: no prior is recorded');
  assert.equal(ledger.inFlight('a'), true);
  ledger.ack('n1');
  assert.equal(ledger.inFlight('a'), false);
  send(ledger, 'n2', [['a', 'v2']]);
  assert.deepEqual(ledger.answered('a'), { version: 'v1', pending: true });
  assert.equal(ledger.held.get('a'), 'v2', 'held is what the client will hold');
  ledger.ack('n2');
  assert.equal(ledger.answered('a'), undefined);
});

test('ledger: an ACKed removal settles the name the client no longer holds', () => {
  const ledger = new AckLedger(false);
  send(ledger, 'n1', [['a', 'v1']]);
  ledger.ack('n1');
  send(ledger, 'n2', [], ['a']);
  assert.deepEqual(ledger.answered('a'), { version: 'v1', pending: true });
  ledger.ack('n2');
  assert.equal(ledger.answered('a'), undefined);
  assert.equal(ledger.held.get('a'), TOLD_ABSENT);
});

test('ledger: a NACK records the rejected version and what the client kept; earlier responses count as ACKed', () => {
  const ledger = new AckLedger(false);
  send(ledger, 'n1', [['a', 'v1']]);
  ledger.ack('n1');
  send(ledger, 'n2', [['b', 'v1']]);
  send(ledger, 'n3', [['a', 'v2']]);
  ledger.nack('n3', 'bad listener');
  assert.equal(ledger.nacks, 1);
  assert.equal(ledger.unacked.length, 0, 'n2 is settled by the NACK of the later n3');
  const rejected = ledger.rejected?.get('a');
  assert.equal(rejected?.version, 'v2');
  assert.equal(rejected?.details, 'bad listener');
  assert.equal(rejected?.kept, 'v1');
  assert.deepEqual(ledger.answered('a'), { version: 'v1', pending: false });
  assert.equal(ledger.rejected?.has('b'), false);
});

test('ledger: a NACK of an unknown nonce is counted and rejects nothing; an ACK of a newer version ends a rejection', () => {
  const ledger = new AckLedger(false);
  ledger.nack('never-sent', 'stale');
  assert.equal(ledger.nacks, 1);
  assert.equal(ledger.rejected?.size ?? 0, 0);
  send(ledger, 'n1', [['a', 'v1']]);
  ledger.nack('n1', 'bad');
  assert.equal(ledger.rejected?.get('a')?.kept, undefined, 'it held nothing before');
  send(ledger, 'n2', [['a', 'v2']]);
  ledger.ack('n2');
  assert.equal(ledger.rejected, undefined);
});

test('ledger (state of the world): the version a client reports is the ACKed response that last changed the name', () => {
  const ledger = new AckLedger(true);
  const first = send(ledger, 'n1', [['a', 'v1'], ['b', 'v1']]);
  ledger.noteChanges([first], first.adds);
  ledger.ack('n1');
  // A full state of the world repeats `a` unchanged next to the changed `b`.
  const second = send(ledger, 'n2', [['a', 'v1'], ['b', 'v2']]);
  ledger.noteChanges([second], second.adds.filter((v) => v.name === 'b'));
  assert.equal(ledger.responseVersion('b'), 'n1', 'not before the client ACKs');
  ledger.ack('n2');
  assert.equal(ledger.responseVersion('a'), 'n1');
  assert.equal(ledger.responseVersion('b'), 'n2');
  assert.equal(new AckLedger(false).responseVersion('a'), undefined);
});

test('ledger (state of the world): ACKing an older response does not settle a change a newer one carries', () => {
  const ledger = new AckLedger(true);
  const first = send(ledger, 'n1', [['a', 'v1']]);
  ledger.noteChanges([first], first.adds);
  const second = send(ledger, 'n2', [['a', 'v2']]);
  ledger.noteChanges([second], second.adds);
  ledger.ack('n1');
  assert.equal(ledger.responseVersion('a'), undefined, 'n1 no longer carries the latest change of a');
  ledger.ack('n2');
  assert.equal(ledger.responseVersion('a'), 'n2');
});

test('ledger: names in flight, newest response first, then names with a prior version', () => {
  const ledger = new AckLedger(false);
  send(ledger, 'n1', [['a', 'v1']]);
  ledger.ack('n1');
  send(ledger, 'n2', [['a', 'v2']]);
  send(ledger, 'n3', [['b', 'v1']], ['c']);
  assert.deepEqual([...ledger.namesInFlight()], ['b', 'c', 'a', 'a']);
});

test('ledger: names kept behind are status candidates until a status view clears them', () => {
  const ledger = new AckLedger(false);
  assert.deepEqual(ledger.behindCandidates(), []);
  ledger.keptBehind('a');
  ledger.keptBehind('b');
  ledger.notBehind('a');
  assert.deepEqual(ledger.behindCandidates(), ['b']);
});
