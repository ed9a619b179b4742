/**
 * Certificates for TLS tests, made at run time with the `openssl` CLI into a
 * temporary directory (never committed): a CA, and leaf certificates it signs
 * with the SANs a test needs.
 *
 *   const pki = TestPki.create();                 // a fresh CA
 *   const server = pki.issue('relay', { dns: ['localhost'], ips: ['127.0.0.1'] });
 *   const client = pki.issue('web', { uris: ['spiffe://example.org/ns/web/sa/a'] });
 *   server.cert / server.key / pki.caCert          // file paths
 *   pki.cleanup();
 *
 * Missing openssl: `opensslSkip()` skips loudly outside CI, and returns false
 * under CI=true so the test runs and fails.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const OPENSSL = process.env.OPENSSL_BIN ?? 'openssl';
let availability: boolean | undefined;
let bannerShown = false;

export function opensslAvailable(): boolean {
  availability ??= spawnSync(OPENSSL, ['version'], { stdio: 'ignore', timeout: 5000 }).status === 0;
  return availability;
}

export function opensslSkip(what = 'TLS tests'): string | false {
  if (opensslAvailable() || process.env.CI === 'true') return false;
  if (!bannerShown) {
    bannerShown = true;
    const line = '!'.repeat(78);
    console.warn(`\n${line}\n!!  SKIPPING ${what}: '${OPENSSL}' not found on PATH (apt-get install openssl).\n!!  Under CI=true these tests fail instead.\n${line}\n`);
  }
  return `openssl not installed (${what})`;
}

function openssl(args: string[], cwd: string): void {
  const r = spawnSync(OPENSSL, args, { cwd, encoding: 'utf8', timeout: 20_000 });
  if (r.status !== 0) throw new Error(`openssl ${args.join(' ')} failed: ${r.error?.message ?? r.stderr}`);
}

export interface IssuedCert {
  cert: string;
  key: string;
  certPem: Buffer;
  keyPem: Buffer;
}

export interface IssueOptions {
  dns?: string[];
  ips?: string[];
  uris?: string[];
  /** Subject CN (default: the name given to issue()). */
  cn?: string;
  /** Days valid (default 2). */
  days?: number;
}

export class TestPki {
  private serial = 0;

  private constructor(
    readonly dir: string,
    readonly caCert: string,
    private readonly caKey: string,
  ) {}

  /** A new CA in its own temporary directory (or under `dir`). */
  static create(name = 'test-ca', dir?: string): TestPki {
    const root = dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'xdstp-pki-'));
    fs.mkdirSync(root, { recursive: true });
    const caKey = path.join(root, `${name}.key`);
    const caCert = path.join(root, `${name}.crt`);
    openssl(
      ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', caKey, '-out', caCert, '-days', '2',
        '-subj', `/CN=${name}`, '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'],
      root,
    );
    return new TestPki(root, caCert, caKey);
  }

  get caPem(): Buffer {
    return fs.readFileSync(this.caCert);
  }

  /** A leaf certificate signed by this CA, usable as server and client certificate. */
  issue(name: string, opts: IssueOptions = {}): IssuedCert {
    const base = path.join(this.dir, `${name}-${++this.serial}`);
    const key = `${base}.key`;
    const csr = `${base}.csr`;
    const cert = `${base}.crt`;
    const ext = `${base}.ext`;
    const sans = [
      ...(opts.dns ?? []).map((d) => `DNS:${d}`),
      ...(opts.ips ?? []).map((i) => `IP:${i}`),
      ...(opts.uris ?? []).map((u) => `URI:${u}`),
    ];
    fs.writeFileSync(
      ext,
      ['basicConstraints=CA:FALSE', 'keyUsage=critical,digitalSignature', 'extendedKeyUsage=serverAuth,clientAuth', ...(sans.length ? [`subjectAltName=${sans.join(',')}`] : [])].join('\n') + '\n',
    );
    openssl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', csr, '-subj', `/CN=${opts.cn ?? name}`], this.dir);
    openssl(
      ['x509', '-req', '-in', csr, '-CA', this.caCert, '-CAkey', this.caKey, '-set_serial', String(Date.now() * 1000 + this.serial), '-out', cert, '-days', String(opts.days ?? 2), '-extfile', ext],
      this.dir,
    );
    return { cert, key, certPem: fs.readFileSync(cert), keyPem: fs.readFileSync(key) };
  }

  cleanup(): void {
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
