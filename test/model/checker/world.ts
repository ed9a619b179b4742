/**
 * The real system a run drives: TestOrigin control planes (authority a1 on two
 * servers for failover, a2, and the default upstream), one relay started
 * in-process (two on one real redis-server with `redis`), and the operations
 * of the control-plane and relay steps.
 */
import { startRelay, type RunningRelay } from '../../../src/relay';
import type { RelayConfigInput } from '../../../src/config';
import { TestOrigin } from '../../support/origin';
import { RedisServer } from '../../support/redis-server';
import { sleep, withTimeout } from '../../support/wait';
import type { Authority } from '../types';
import { AUTHORITIES, encodePayload } from './universe';

export interface WorldOptions {
  unsubscribeGraceMs: number;
  redis: boolean;
}

/** Key of an authority in the world's maps (the default upstream has none). */
export function authorityKey(a: Authority): string {
  return a ?? '(default)';
}

export class World {
  /** Control-plane servers per authority, in the relay's failover order. */
  readonly servers = new Map<string, TestOrigin[]>();
  readonly relays: RunningRelay[] = [];
  private readonly configs: RelayConfigInput[] = [];
  redis: RedisServer | null = null;

  private constructor(readonly opts: WorldOptions) {}

  static async start(opts: WorldOptions): Promise<World> {
    const w = new World(opts);
    try {
      await w.boot();
    } catch (err) {
      await w.stop();
      throw err;
    }
    return w;
  }

  private async boot(): Promise<void> {
    for (const a of AUTHORITIES) {
      const n = a === 'a1' ? 2 : 1;
      const list: TestOrigin[] = [];
      for (let i = 0; i < n; i++) list.push(await TestOrigin.start({ label: `cp-${a}-${i}` }));
      this.servers.set(a, list);
    }
    this.servers.set(authorityKey(null), [await TestOrigin.start({ label: 'cp-default' })]);
    if (this.opts.redis) this.redis = await RedisServer.start();
    const relays = this.opts.redis ? 2 : 1;
    for (let i = 0; i < relays; i++) {
      const config: RelayConfigInput = {
        listen: '127.0.0.1:0',
        admin: null,
        authorities: AUTHORITIES.map((a) => ({ name: a, uris: this.servers.get(a)!.map((s) => s.uri) })),
        defaultUpstream: this.servers.get(authorityKey(null))!.map((s) => s.uri),
        unsubscribeGraceMs: this.opts.unsubscribeGraceMs,
        nodeId: `modelcheck-relay-${i}`,
        logLevel: process.env.RELAY_TEST_LOGS ?? 'silent',
        shutdownGraceMs: 500,
        ...(this.redis ? { redis: { spec: this.redis.url, prefix: 'modelcheck:', warmTimeoutMs: 3000 } } : {}),
      };
      const relay = await withTimeout(startRelay(config), 10_000, 'startRelay');
      // A restart listens on the same port, so clients reconnect to the same address.
      this.configs.push({ ...config, listen: `127.0.0.1:${relay.port}` });
      this.relays.push(relay);
    }
  }

  address(relayIndex: number): string {
    return `127.0.0.1:${this.relays[relayIndex]!.port}`;
  }

  serversOf(a: Authority): TestOrigin[] {
    return this.servers.get(authorityKey(a)) ?? [];
  }

  allServers(): TestOrigin[] {
    return [...this.servers.values()].flat();
  }

  // ------------------------------------------------------------ resources

  exists(a: Authority, typeUrl: string, name: string): boolean {
    return this.serversOf(a)[0]?.getResource(typeUrl, name) !== undefined;
  }

  put(a: Authority, typeUrl: string, name: string, version: string): void {
    // Every server of an authority holds the same resources (failover loses nothing).
    for (const s of this.serversOf(a)) s.setResource(typeUrl, name, encodePayload(name, version), version);
  }

  delete(a: Authority, typeUrl: string, name: string): void {
    for (const s of this.serversOf(a)) if (s.getResource(typeUrl, name)) s.removeResource(typeUrl, name);
  }

  // ---------------------------------------------------- control-plane faults

  anyRunning(a: Authority): boolean {
    return this.serversOf(a).some((s) => s.running);
  }

  allRunning(a: Authority): boolean {
    return this.serversOf(a).every((s) => s.running);
  }

  async cpStop(a: Authority): Promise<void> {
    for (const s of this.serversOf(a)) await s.stop();
  }

  async cpStart(a: Authority): Promise<void> {
    for (const s of this.serversOf(a)) if (!s.running) await s.restart();
  }

  /** `times` restarts of the running servers, `gapMs` apart (a rolling restart). */
  async cpRestart(a: Authority, times: number, gapMs: number): Promise<void> {
    const running = this.serversOf(a).filter((s) => s.running);
    for (let i = 0; i < times; i++) {
      if (i > 0) await sleep(gapMs);
      for (const s of running) await s.restart();
    }
  }

  /** Stop the server the relay is on and make sure the other one runs. */
  async failover(a: Authority): Promise<void> {
    const list = this.serversOf(a);
    if (list.length < 2) return;
    const active = list.find((s) => s.streamCount > 0) ?? list.find((s) => s.running) ?? list[0]!;
    for (const s of list) if (s !== active && !s.running) await s.restart();
    await active.stop();
  }

  // ------------------------------------------------------------ relay faults

  async stopRelay(i: number): Promise<void> {
    await withTimeout(this.relays[i]!.stop(), 10_000, 'relay.stop()').catch((err: Error) => {
      process.stderr.write(`warning: ${err.message}\n`);
    });
  }

  async startRelay(i: number): Promise<void> {
    this.relays[i] = await withTimeout(startRelay(this.configs[i]!), 15_000, 'startRelay');
  }

  /** Kill redis-server and start it again on the same port: empty (no persistence). */
  async redisRestartEmpty(): Promise<void> {
    if (!this.redis) return;
    await this.redis.kill();
    await this.redis.restart();
  }

  async stop(): Promise<void> {
    for (let i = 0; i < this.relays.length; i++) await this.stopRelay(i);
    for (const s of this.allServers()) await s.stop();
    if (this.redis) await this.redis.dispose().catch(() => undefined);
  }
}
