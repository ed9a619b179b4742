/**
 * TLS on both sides of the relay.
 *
 * Downstream: `--tls-cert/--tls-key` (and `--tls-client-ca` for mTLS) become
 * grpc-js server credentials fed by a certificate provider that re-reads the
 * files: a rotated certificate is used for new connections, open connections
 * keep the session they negotiated. A half-written rotation (new certificate,
 * old key) is never published; the previous pair stays until both match.
 *
 * Upstream: `grpcs://` servers get channel credentials built from the
 * authority's CA / client certificate / key, re-read on every connection
 * attempt (so a rotated client certificate is used at the next reconnect),
 * and an optional server-name override for certificates whose name differs
 * from the address.
 */
import { X509Certificate, createPrivateKey, type KeyObject } from 'node:crypto';
import * as fs from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../log';
import { FilePoller } from './file-poller';

/** `--tls-cert/--tls-key/--tls-client-ca`. */
export interface DownstreamTlsSpec {
  certFile: string;
  keyFile: string;
  /** Clients must present a certificate signed by this CA (mTLS). */
  clientCaFile?: string;
}

/** Per-authority upstream TLS (`grpcs://`): config-file `ca/cert/key/server-name`, or the `--upstream-tls-*` defaults. */
export interface UpstreamTlsSpec {
  caFile?: string;
  certFile?: string;
  keyFile?: string;
  /** Name to verify the server certificate against (and send as SNI and :authority) instead of the address's host. */
  serverName?: string;
}

const PEM_CERT = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/** Every certificate in a PEM bundle; throws a clear error when there is none or one does not parse. */
export function parseCertificates(pem: Buffer | string, what: string): X509Certificate[] {
  const blocks = pem.toString('latin1').match(PEM_CERT) ?? [];
  if (blocks.length === 0) throw new Error(`${what}: no PEM certificate (-----BEGIN CERTIFICATE-----) found`);
  return blocks.map((b, i) => {
    try {
      return new X509Certificate(b);
    } catch (err) {
      throw new Error(`${what}: certificate ${i + 1} does not parse: ${(err as Error).message}`);
    }
  });
}

export function parsePrivateKey(pem: Buffer, what: string): KeyObject {
  try {
    return createPrivateKey(pem);
  } catch (err) {
    throw new Error(`${what}: not a PEM private key: ${(err as Error).message}`);
  }
}

/** The leaf certificate of `certPem` must belong to `keyPem`. Returns the leaf. */
export function checkKeyPair(certPem: Buffer, keyPem: Buffer, certWhat: string, keyWhat: string): X509Certificate {
  const [leaf] = parseCertificates(certPem, certWhat);
  const key = parsePrivateKey(keyPem, keyWhat);
  if (!leaf.checkPrivateKey(key)) throw new Error(`${keyWhat}: the private key does not belong to the certificate in ${certWhat}`);
  return leaf;
}

function readFile(file: string, what: string): Buffer {
  try {
    return fs.readFileSync(file);
  } catch (err) {
    throw new Error(`${what} ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
  }
}

/** Problems with the downstream TLS files (missing, unparsable, key not matching), for `validate` and startup. */
export function checkDownstreamTlsFiles(spec: DownstreamTlsSpec): { path: string; message: string }[] {
  const problems: { path: string; message: string }[] = [];
  const attempt = (path: string, fn: () => void): void => {
    try {
      fn();
    } catch (err) {
      problems.push({ path, message: (err as Error).message });
    }
  };
  let cert: Buffer | undefined;
  let key: Buffer | undefined;
  attempt('tls-cert', () => {
    cert = readFile(spec.certFile, 'certificate');
    parseCertificates(cert, spec.certFile);
  });
  attempt('tls-key', () => {
    key = readFile(spec.keyFile, 'key');
    parsePrivateKey(key, spec.keyFile);
  });
  if (cert && key && problems.length === 0) attempt('tls-key', () => void checkKeyPair(cert!, key!, spec.certFile, spec.keyFile));
  if (spec.clientCaFile) attempt('tls-client-ca', () => void parseCertificates(readFile(spec.clientCaFile!, 'client CA'), spec.clientCaFile!));
  return problems;
}

/** Problems with an authority's upstream TLS files; `path` is where they were configured. */
export function checkUpstreamTlsFiles(spec: UpstreamTlsSpec, path: string): { path: string; message: string }[] {
  const problems: { path: string; message: string }[] = [];
  try {
    loadUpstreamTls(spec);
  } catch (err) {
    problems.push({ path, message: (err as Error).message });
  }
  return problems;
}

interface IdentityMaterial {
  cert: Buffer;
  key: Buffer;
  ca: Buffer | null;
  leaf: X509Certificate;
}

function loadIdentity(spec: DownstreamTlsSpec, contents?: Buffer[]): IdentityMaterial {
  const cert = contents?.[0] ?? readFile(spec.certFile, 'certificate');
  const key = contents?.[1] ?? readFile(spec.keyFile, 'key');
  const leaf = checkKeyPair(cert, key, spec.certFile, spec.keyFile);
  let ca: Buffer | null = null;
  if (spec.clientCaFile) {
    ca = contents?.[2] ?? readFile(spec.clientCaFile, 'client CA');
    parseCertificates(ca, spec.clientCaFile);
  }
  return { cert, key, ca, leaf };
}

type IdentityListener = (update: grpc.experimental.IdentityCertificateUpdate | null) => void;
type CaListener = (update: grpc.experimental.CaCertificateUpdate | null) => void;

/**
 * grpc-js certificate provider over the downstream files. Unlike grpc-js's
 * own FileWatcherCertificateProvider it publishes only a checked set (the
 * certificate parses, the key is its key, the CA parses), so a rotation caught
 * half-way never takes the listener down.
 */
class ReloadingCertificateProvider implements grpc.experimental.CertificateProvider {
  private material: IdentityMaterial;
  private readonly identityListeners = new Set<IdentityListener>();
  private readonly caListeners = new Set<CaListener>();
  private readonly poller: FilePoller;

  constructor(
    private readonly spec: DownstreamTlsSpec,
    private readonly hooks: { onReload(leaf: X509Certificate): void; onError(err: Error): void },
    intervalMs: number,
  ) {
    this.material = loadIdentity(spec);
    const files = [spec.certFile, spec.keyFile, ...(spec.clientCaFile ? [spec.clientCaFile] : [])];
    const initial = [this.material.cert, this.material.key, ...(this.material.ca ? [this.material.ca] : [])];
    this.poller = new FilePoller(files, initial, (contents) => this.reload(contents), hooks.onError, intervalMs);
  }

  get leaf(): X509Certificate {
    return this.material.leaf;
  }

  private reload(contents: Buffer[]): void {
    let next: IdentityMaterial;
    try {
      next = loadIdentity(this.spec, contents);
    } catch (err) {
      this.hooks.onError(err as Error);
      return;
    }
    const caChanged = !(next.ca === null ? this.material.ca === null : this.material.ca?.equals(next.ca));
    this.material = next;
    if (caChanged) for (const l of this.caListeners) l(this.caUpdate());
    for (const l of this.identityListeners) l(this.identityUpdate());
    this.hooks.onReload(next.leaf);
  }

  private identityUpdate(): grpc.experimental.IdentityCertificateUpdate {
    return { certificate: this.material.cert, privateKey: this.material.key };
  }

  private caUpdate(): grpc.experimental.CaCertificateUpdate | null {
    return this.material.ca ? { caCertificate: this.material.ca } : null;
  }

  // The first update goes out on the next tick: grpc-js registers its own
  // watcher only after adding these listeners, and would miss a synchronous one.
  addIdentityCertificateListener(listener: IdentityListener): void {
    this.identityListeners.add(listener);
    process.nextTick(() => {
      if (this.identityListeners.has(listener)) listener(this.identityUpdate());
    });
  }

  removeIdentityCertificateListener(listener: IdentityListener): void {
    this.identityListeners.delete(listener);
  }

  addCaCertificateListener(listener: CaListener): void {
    this.caListeners.add(listener);
    process.nextTick(() => {
      if (this.caListeners.has(listener)) listener(this.caUpdate());
    });
  }

  removeCaCertificateListener(listener: CaListener): void {
    this.caListeners.delete(listener);
  }

  close(): void {
    this.poller.close();
  }
}

export interface DownstreamTls {
  readonly credentials: grpc.ServerCredentials;
  /** Stops watching the files. */
  close(): void;
}

function describe(cert: X509Certificate): { subject: string; notAfter: string; fingerprint256: string } {
  return { subject: cert.subject.replace(/\n/g, ', '), notAfter: cert.validTo, fingerprint256: cert.fingerprint256 };
}

/**
 * Server credentials for the downstream listener. Throws (with the file and
 * the reason) when the files are missing or do not form a valid pair.
 */
export function createDownstreamTls(
  spec: DownstreamTlsSpec,
  opts: { logger: Logger; reloadIntervalMs?: number; onReload?: (result: 'ok' | 'error') => void },
): DownstreamTls {
  const log = opts.logger.child({ component: 'tls' });
  const provider = new ReloadingCertificateProvider(
    spec,
    {
      onReload: (leaf) => {
        log.info({ certificate: describe(leaf) }, 'downstream TLS certificate reloaded: new connections use it');
        opts.onReload?.('ok');
      },
      onError: (err) => {
        log.error({ err: err.message }, 'downstream TLS files not reloaded: keeping the previous certificate');
        opts.onReload?.('error');
      },
    },
    opts.reloadIntervalMs ?? 2000,
  );
  const leaf = provider.leaf;
  if (Date.parse(leaf.validTo) < Date.now()) log.warn({ certificate: describe(leaf) }, 'downstream TLS certificate has expired');
  log.info({ certificate: describe(leaf), mtls: spec.clientCaFile !== undefined }, 'downstream TLS enabled');
  const mtls = spec.clientCaFile !== undefined;
  // grpc-js names these parameters (caProvider, identityProvider) but passes them
  // on as (identity, ca): the identity provider goes first.
  const credentials = grpc.experimental.createCertificateProviderServerCredentials(provider, mtls ? provider : null, mtls);
  return { credentials, close: () => provider.close() };
}

interface UpstreamTlsMaterial {
  ca: Buffer | null;
  cert: Buffer | null;
  key: Buffer | null;
}

function loadUpstreamTls(spec: UpstreamTlsSpec): UpstreamTlsMaterial {
  if ((spec.certFile === undefined) !== (spec.keyFile === undefined)) {
    throw new Error(spec.certFile ? 'a client certificate needs its key (key / --upstream-tls-key)' : 'a client key needs its certificate (cert / --upstream-tls-cert)');
  }
  const ca = spec.caFile ? readFile(spec.caFile, 'CA') : null;
  if (ca && spec.caFile) parseCertificates(ca, spec.caFile);
  const cert = spec.certFile ? readFile(spec.certFile, 'client certificate') : null;
  const key = spec.keyFile ? readFile(spec.keyFile, 'client key') : null;
  if (cert && key) checkKeyPair(cert, key, spec.certFile!, spec.keyFile!);
  return { ca, cert, key };
}

export interface ChannelSetup {
  credentials: grpc.ChannelCredentials;
  options: grpc.ChannelOptions;
}

/**
 * Channel credentials for one authority's `grpcs://` servers. Each call of
 * `channel()` re-reads the files (one per connection attempt); if they are
 * unreadable or inconsistent then, the last good set is used and the problem
 * is logged once per distinct error.
 */
export class UpstreamTls {
  private last: UpstreamTlsMaterial;
  private lastError: string | undefined;

  constructor(
    private readonly spec: UpstreamTlsSpec,
    private readonly logger: Logger,
  ) {
    this.last = loadUpstreamTls(spec);
  }

  channel(): ChannelSetup {
    try {
      this.last = loadUpstreamTls(this.spec);
      this.lastError = undefined;
    } catch (err) {
      const message = (err as Error).message;
      if (message !== this.lastError) {
        this.lastError = message;
        this.logger.error({ err: message }, 'upstream TLS files not reloaded: using the previous ones');
      }
    }
    const { ca, cert, key } = this.last;
    const options: grpc.ChannelOptions = {};
    if (this.spec.serverName) {
      options['grpc.ssl_target_name_override'] = this.spec.serverName;
      options['grpc.default_authority'] = this.spec.serverName;
    }
    return { credentials: grpc.credentials.createSsl(ca, key, cert), options };
  }
}

/** Plaintext `grpc://`. */
export function insecureChannel(): ChannelSetup {
  return { credentials: grpc.credentials.createInsecure(), options: {} };
}
