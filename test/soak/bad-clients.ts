/**
 * The bad half of soak scenario (e): a child process (forked by storm.ts, so
 * its own work never delays the good clients measured in the parent) that
 * keeps `slots` hostile streams open against the relay until `durationMs`
 * is over. Each slot plays one kind of bad client in a loop — when the
 * relay ends its stream or connection, it opens the next one:
 *
 *   random      random bytes as a gRPC message
 *   utf8        a request whose names are invalid UTF-8
 *   huge        10,000 names in one request (the same 10,000 for every slot)
 *   unknown     a type URL nobody serves
 *   nack        subscribes to the good clients' glob, NACKs every response, and sends NACKs of made-up nonces
 *   foreign     names of authorities the relay does not serve
 *   h2          HTTP/2 framing abuse over a raw connection: PING and SETTINGS floods
 *
 * Started with one JSON argument ({ port, durationMs, slots, glob }); prints
 * one JSON line with what it did when done.
 */
import { DeltaClient } from '../support/delta-client';
import { CLUSTER } from '../support/names';
import { Rand } from '../support/prng';
import { RawH2, grpcMessage } from '../support/raw-h2';
import { lenField, stringField } from '../../src/proto/wire';

export interface BadClientsConfig {
  port: number;
  durationMs: number;
  slots: number;
  /** The glob the good clients subscribe (the NACK flooders take it too). */
  glob: string;
}

export interface BadClientsReport {
  streams: Record<string, number>;
  /** How the relay ended them: gRPC status code → count. */
  endings: Record<string, number>;
}

const KINDS = ['random', 'utf8', 'huge', 'unknown', 'nack', 'foreign', 'h2'] as const;
type Kind = (typeof KINDS)[number];

const HUGE_NAMES = Array.from({ length: 10_000 }, (_, i) => `xdstp://bench/envoy.config.cluster.v3.Cluster/huge/n${i}`);

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

async function main(): Promise<void> {
  const cfg = JSON.parse(process.argv[2] ?? '{}') as BadClientsConfig;
  const target = `127.0.0.1:${cfg.port}`;
  const end = Date.now() + cfg.durationMs;
  const report: BadClientsReport = { streams: {}, endings: {} };
  const count = (kind: Kind): void => {
    report.streams[kind] = (report.streams[kind] ?? 0) + 1;
  };
  const ended = (c: DeltaClient): void => {
    const code = c.status ? String(c.status.code) : 'open at end';
    report.endings[code] = (report.endings[code] ?? 0) + 1;
  };

  /** One stream of a bad kind; resolves when the relay ends it or after `lifeMs`. */
  async function grpcBad(kind: Kind, rand: Rand, lifeMs: number): Promise<void> {
    const c = new DeltaClient(target, {
      nodeId: `bad-${kind}-${rand.int(1e9)}`,
      ...(kind === 'nack' ? { reject: () => 'soak: rejecting everything' } : {}),
    });
    count(kind);
    try {
      switch (kind) {
        case 'random': {
          c.sendRaw(Buffer.from(Array.from({ length: 1 + rand.int(2000) }, () => rand.int(256))));
          break;
        }
        case 'utf8': {
          const bad = Buffer.from([0x78, 0x64, 0xff, 0xfe, 0xc0, 0xaf, 0xed, 0xa0, 0x80]);
          c.sendRaw(Buffer.concat([stringField(2, CLUSTER), lenField(3, bad), lenField(3, Buffer.concat([Buffer.from('xdstp://bench/'), bad]))]));
          break;
        }
        case 'huge':
          c.subscribe(CLUSTER, HUGE_NAMES);
          break;
        case 'unknown':
          c.subscribe('type.googleapis.com/soak.Unknown', Array.from({ length: 100 }, (_, i) => `xdstp://bench/soak.Unknown/u${i}`));
          break;
        case 'nack': {
          c.subscribe(CLUSTER, [cfg.glob]);
          // NACKs of nonces never sent, as fast as the relay takes them, for a while.
          for (let i = 0; i < 200 && !c.status && Date.now() < end; i++) {
            c.nack(CLUSTER, `bogus-${i}`, 'soak: bogus NACK');
            if (i % 20 === 19) await sleep(10);
          }
          break;
        }
        case 'foreign':
          c.subscribe(CLUSTER, Array.from({ length: 500 }, (_, i) => `xdstp://foreign-${rand.int(1000)}/envoy.config.cluster.v3.Cluster/f${i}`));
          break;
        default:
          break;
      }
      await Promise.race([c.ended, sleep(lifeMs)]);
      ended(c);
    } finally {
      c.close();
    }
  }

  /** A raw HTTP/2 connection that floods PINGs and SETTINGS until the relay cuts it (or `lifeMs`). */
  async function h2Bad(lifeMs: number): Promise<void> {
    count('h2');
    let h: RawH2;
    try {
      h = await RawH2.connect(cfg.port);
    } catch {
      return;
    }
    const until = Math.min(end, Date.now() + lifeMs);
    try {
      const sid = h.openStream();
      h.sendData(sid, grpcMessage(Buffer.from([0x12, 0x00])));
      for (let i = 0; Date.now() < until && !h.socket.destroyed; i++) {
        h.ping();
        h.settings();
        if (i % 50 === 49) await sleep(5);
      }
    } finally {
      report.endings.h2 = (report.endings.h2 ?? 0) + 1;
      h.close();
    }
  }

  async function slot(i: number): Promise<void> {
    const rand = new Rand(1000 + i);
    const kind = KINDS[i % KINDS.length]!;
    // Spread the starts so the storm builds over a second rather than in one burst.
    await sleep(rand.int(1000));
    while (Date.now() < end) {
      const lifeMs = 500 + rand.int(1500);
      try {
        if (kind === 'h2') await h2Bad(lifeMs);
        else await grpcBad(kind, rand, lifeMs);
      } catch {
        // a refused connection is one of the relay's answers: go again
      }
      await sleep(20);
    }
  }

  await Promise.all(Array.from({ length: cfg.slots }, (_, i) => slot(i)));
  process.stdout.write(`${JSON.stringify(report)}\n`);
  process.exit(0);
}

main().catch((err: unknown) => {
  process.stderr.write(`bad-clients: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
