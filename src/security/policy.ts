/**
 * `--policy FILE`: which client identities may subscribe to which
 * authorities, types and names, and who may call CSDS.
 *
 * ```yaml
 * allow-node-id-identity: false
 * rules:
 *   - identities: ["spiffe://example.org/ns/web/*", "edge-1.example.org"]
 *     authorities: ["a1", "a2"]   # "" = the default upstream (legacy names)
 *     types: []                   # type URLs or message names; empty = every type
 *     names: []                   # name prefixes; empty = every name
 *     csds: false
 * ```
 *
 * With a policy, what no rule allows is denied; without one everything is
 * allowed. An empty (or absent) list in a rule means "any": a rule with no
 * identities applies to every client, identified or not. The file is polled;
 * a new version that does not parse is logged and the previous policy stays.
 */
import { EventEmitter } from 'node:events';
import * as fs from 'node:fs';
import YAML from 'yaml';
import type { Logger } from '../log';
import { FilePoller } from './file-poller';

/**
 * What a client may do: join a subscription (the engine's JoinAuthorizer is
 * the first part), call CSDS, be known by its node id.
 */
export interface ClientAuthorizer {
  /** authority: xdstp authority, or null for legacy names (the policy's "" authority). */
  allows(identity: string | undefined, typeUrl: string, authority: string | null, name: string): boolean;
  /** May this client call the CSDS service? */
  allowsCsds(identity: string | undefined): boolean;
  /** Whether a client without a certificate is known by its node id. */
  readonly allowNodeIdIdentity: boolean;
}

/** No policy: everything is allowed, node ids are not identities (nothing needs them). */
export const ALLOW_ALL: ClientAuthorizer = {
  allows: () => true,
  allowsCsds: () => true,
  allowNodeIdIdentity: false,
};

export class PolicyError extends Error {}

interface Rule {
  /** null = any client (identified or not). */
  identities: { exact: Set<string>; prefixes: string[] } | null;
  /** null = any authority; "" stands for legacy names. */
  authorities: Set<string> | null;
  /** null = any type; full type URLs and message names (the part after the last '/'). */
  types: Set<string> | null;
  /** null = any name. */
  names: string[] | null;
  csds: boolean;
}

const RULE_KEYS = new Set(['identities', 'authorities', 'types', 'names', 'csds']);
const TOP_KEYS = new Set(['allow-node-id-identity', 'rules']);

function stringList(v: unknown, where: string): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new PolicyError(`${where}: expected a list of strings, got ${JSON.stringify(v)}`);
  return v.map((s, i) => {
    if (typeof s !== 'string') throw new PolicyError(`${where}[${i}]: expected a string, got ${JSON.stringify(s)}`);
    return s;
  });
}

function parseRule(raw: unknown, where: string): Rule {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new PolicyError(`${where}: expected a mapping`);
  const r = raw as Record<string, unknown>;
  for (const k of Object.keys(r)) {
    if (!RULE_KEYS.has(k)) throw new PolicyError(`${where}: unknown key "${k}" (expected ${[...RULE_KEYS].join(', ')})`);
  }
  const identities = stringList(r.identities, `${where}.identities`);
  const exact = new Set<string>();
  const prefixes: string[] = [];
  identities.forEach((id, i) => {
    if (id === '') throw new PolicyError(`${where}.identities[${i}]: an identity cannot be empty`);
    const star = id.indexOf('*');
    if (star >= 0 && star !== id.length - 1) {
      throw new PolicyError(`${where}.identities[${i}]: "${id}": * is allowed only at the end (a prefix)`);
    }
    if (star >= 0) prefixes.push(id.slice(0, -1));
    else exact.add(id);
  });
  const authorities = stringList(r.authorities, `${where}.authorities`);
  const types = stringList(r.types, `${where}.types`);
  types.forEach((t, i) => {
    if (t === '' || /\s/.test(t)) throw new PolicyError(`${where}.types[${i}]: expected a type URL or message name, got ${JSON.stringify(t)}`);
  });
  const names = stringList(r.names, `${where}.names`);
  names.forEach((n, i) => {
    if (n === '') throw new PolicyError(`${where}.names[${i}]: an empty prefix would match every name; leave the list empty instead`);
  });
  if (r.csds !== undefined && r.csds !== null && typeof r.csds !== 'boolean') {
    throw new PolicyError(`${where}.csds: expected true or false, got ${JSON.stringify(r.csds)}`);
  }
  return {
    identities: identities.length === 0 ? null : { exact, prefixes },
    authorities: authorities.length === 0 ? null : new Set(authorities),
    types: types.length === 0 ? null : new Set(types),
    names: names.length === 0 ? null : names,
    csds: r.csds === true,
  };
}

function identityMatches(rule: Rule, identity: string | undefined): boolean {
  if (rule.identities === null) return true;
  if (identity === undefined) return false;
  if (rule.identities.exact.has(identity)) return true;
  return rule.identities.prefixes.some((p) => identity.startsWith(p));
}

function typeMatches(rule: Rule, typeUrl: string): boolean {
  if (rule.types === null) return true;
  if (rule.types.has(typeUrl)) return true;
  return rule.types.has(typeUrl.slice(typeUrl.lastIndexOf('/') + 1));
}

/** A parsed policy. */
export class Policy implements ClientAuthorizer {
  private constructor(
    readonly allowNodeIdIdentity: boolean,
    private readonly rules: readonly Rule[],
  ) {}

  /** Parses YAML or JSON (JSON is YAML); throws PolicyError naming the offending key. */
  static parse(text: string, source = 'policy'): Policy {
    let doc: unknown;
    try {
      doc = YAML.parse(text);
    } catch (err) {
      throw new PolicyError(`${source}: not YAML or JSON: ${(err as Error).message.split('\n')[0]}`);
    }
    if (!doc || typeof doc !== 'object' || Array.isArray(doc)) {
      throw new PolicyError(`${source}: expected a mapping with "rules" (and optionally "allow-node-id-identity")`);
    }
    const d = doc as Record<string, unknown>;
    for (const k of Object.keys(d)) {
      if (!TOP_KEYS.has(k)) throw new PolicyError(`${source}: unknown key "${k}" (expected allow-node-id-identity, rules)`);
    }
    const allow = d['allow-node-id-identity'];
    if (allow !== undefined && allow !== null && typeof allow !== 'boolean') {
      throw new PolicyError(`${source}: allow-node-id-identity: expected true or false, got ${JSON.stringify(allow)}`);
    }
    if (d.rules !== undefined && d.rules !== null && !Array.isArray(d.rules)) {
      throw new PolicyError(`${source}: rules: expected a list of rules`);
    }
    const rules = ((d.rules as unknown[] | undefined) ?? []).map((r, i) => parseRule(r, `${source}: rules[${i}]`));
    return new Policy(allow === true, rules);
  }

  get ruleCount(): number {
    return this.rules.length;
  }

  allows(identity: string | undefined, typeUrl: string, authority: string | null, name: string): boolean {
    const auth = authority ?? '';
    for (const rule of this.rules) {
      if (!identityMatches(rule, identity)) continue;
      if (rule.authorities !== null && !rule.authorities.has(auth)) continue;
      if (!typeMatches(rule, typeUrl)) continue;
      if (rule.names !== null && !rule.names.some((p) => name.startsWith(p))) continue;
      return true;
    }
    return false;
  }

  allowsCsds(identity: string | undefined): boolean {
    return this.rules.some((r) => r.csds && identityMatches(r, identity));
  }
}

function readPolicyFile(file: string): Buffer {
  try {
    return fs.readFileSync(file);
  } catch (err) {
    throw new PolicyError(`${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
  }
}

/** Reads and parses a policy file; throws PolicyError with the file name. */
export function loadPolicyFile(file: string): Policy {
  return Policy.parse(readPolicyFile(file).toString('utf8'), file);
}

export interface PolicyStoreEvents {
  /** A new policy is in force (the file changed and parsed). */
  change: [policy: Policy];
}

/**
 * The policy in force, reloaded when its file changes. A ClientAuthorizer that
 * always answers with the current policy; `change` fires after a successful
 * reload, so subscriptions the new policy denies can be withdrawn.
 */
export class PolicyStore extends EventEmitter<PolicyStoreEvents> implements ClientAuthorizer {
  private current: Policy;
  private readonly poller: FilePoller;

  constructor(
    readonly file: string,
    opts: { logger: Logger; reloadIntervalMs?: number; onReload?: (result: 'ok' | 'error') => void },
  ) {
    super();
    const text = readPolicyFile(file);
    this.current = Policy.parse(text.toString('utf8'), file);
    const log = opts.logger.child({ component: 'policy', file });
    log.info({ rules: this.current.ruleCount, allowNodeIdIdentity: this.current.allowNodeIdIdentity }, 'authorization policy loaded');
    this.poller = new FilePoller(
      [file],
      [text],
      ([bytes]) => {
        let next: Policy;
        try {
          next = Policy.parse(bytes.toString('utf8'), file);
        } catch (err) {
          log.error({ err: (err as Error).message }, 'authorization policy not reloaded: keeping the previous one');
          opts.onReload?.('error');
          return;
        }
        this.current = next;
        log.info({ rules: next.ruleCount, allowNodeIdIdentity: next.allowNodeIdIdentity }, 'authorization policy reloaded');
        opts.onReload?.('ok');
        this.emit('change', next);
      },
      (err) => {
        log.error({ err: err.message }, 'authorization policy file unreadable: keeping the previous policy');
        opts.onReload?.('error');
      },
      opts.reloadIntervalMs ?? 2000,
    );
  }

  get policy(): Policy {
    return this.current;
  }

  get allowNodeIdIdentity(): boolean {
    return this.current.allowNodeIdIdentity;
  }

  allows(identity: string | undefined, typeUrl: string, authority: string | null, name: string): boolean {
    return this.current.allows(identity, typeUrl, authority, name);
  }

  allowsCsds(identity: string | undefined): boolean {
    return this.current.allowsCsds(identity);
  }

  /** Checks the file now instead of at the next poll. */
  reload(): void {
    this.poller.poll();
  }

  close(): void {
    this.poller.close();
  }
}
