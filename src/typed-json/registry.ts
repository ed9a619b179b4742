/**
 * Envoy's full API type registry: the message types of the `.proto` tree
 * shipped inside `@grpc/grpc-js-xds` (deps/: envoy-api, xds, googleapis,
 * protoc-gen-validate); nothing of Envoy's API is copied into this
 * repository. Loading is lazy twice over: the registry is created on first
 * use, and a `.proto` file (with its imports) is parsed only when a type it
 * declares is first asked for. A typical mesh (listeners with the HTTP
 * connection manager, routes, clusters, endpoints) costs ~70 files.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as protobuf from 'protobufjs';

export const XDS_PACKAGE = '@grpc/grpc-js-xds';
const DEP_ROOTS = ['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'];

export interface RegistryStats {
  /** .proto files parsed so far. */
  files: number;
  /** Time spent parsing them, in ms. */
  loadMs: number;
}

/** Lazily loaded Envoy / xds / googleapis message types. */
export class EnvoyTypeRegistry {
  private readonly root = new protobuf.Root();
  private readonly roots: string[];
  private readonly protobufDir: string;
  private readonly missing = new Set<string>();
  private wellKnownLoaded = false;
  private loadNs = 0n;

  constructor(depsDir: string) {
    this.roots = DEP_ROOTS.map((d) => path.join(depsDir, d));
    this.protobufDir = path.dirname(require.resolve('protobufjs/package.json'));
    this.root.resolvePath = (_origin, target) => this.locate(target) ?? target;
  }

  get stats(): RegistryStats {
    return { files: this.root.files.length, loadMs: Math.round(Number(this.loadNs) / 1e5) / 10 };
  }

  /** Path of an import, or null when no root has it. */
  private locate(target: string): string | null {
    if (target.startsWith('google/protobuf/')) {
      if (target in protobuf.common) return target; // protobufjs bundles these
      const p = path.join(this.protobufDir, target);
      return fs.existsSync(p) ? p : null;
    }
    for (const r of this.roots) {
      const p = path.join(r, target);
      if (fs.existsSync(p)) return p;
    }
    return null;
  }

  private load(files: string[]): void {
    const t0 = process.hrtime.bigint();
    try {
      this.root.loadSync(files, { keepCase: true });
    } finally {
      this.loadNs += process.hrtime.bigint() - t0;
    }
  }

  /** The message type called `fullName`, loading the file that declares it on first use. */
  lookup(fullName: string): protobuf.Type | undefined {
    const found = this.find(fullName);
    if (found || this.missing.has(fullName)) return found;
    if (fullName.startsWith('google.protobuf.')) {
      if (!this.wellKnownLoaded) {
        this.wellKnownLoaded = true;
        this.load(Object.keys(protobuf.common).filter((f) => f.endsWith('.proto')));
      }
    } else {
      const file = this.fileDeclaring(fullName);
      if (file) this.load([file]);
    }
    const type = this.find(fullName);
    if (!type) this.missing.add(fullName);
    return type;
  }

  private find(fullName: string): protobuf.Type | undefined {
    try {
      const t = this.root.lookup(fullName);
      return t instanceof protobuf.Type ? t : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * Envoy's layout puts package `a.b.v3` in directory `a/b/v3/`. Find the
   * package directory (longest prefix first, so nested messages work) and the
   * file in it that declares the top-level message.
   */
  private fileDeclaring(fullName: string): string | undefined {
    const parts = fullName.split('.');
    for (let i = parts.length - 1; i >= 1; i--) {
      const pkg = parts.slice(0, i).join('.');
      const dir = parts.slice(0, i).join('/');
      const decl = new RegExp(`^\\s*message\\s+${parts[i]}\\s*\\{`, 'm');
      const pkgDecl = new RegExp(`^\\s*package\\s+${pkg.replace(/\./g, '\\.')}\\s*;`, 'm');
      for (const r of this.roots) {
        let entries: string[];
        try {
          entries = fs.readdirSync(path.join(r, dir)).filter((f) => f.endsWith('.proto')).sort();
        } catch {
          continue;
        }
        for (const f of entries) {
          let text: string;
          try {
            text = fs.readFileSync(path.join(r, dir, f), 'utf8');
          } catch {
            continue;
          }
          if (pkgDecl.test(text) && decl.test(text)) return `${dir}/${f}`;
        }
      }
    }
    return undefined;
  }
}

/** Where `@grpc/grpc-js-xds` keeps the API protos; throws a clear error when it is not installed. */
export function envoyProtoDir(): string {
  let pkg: string;
  try {
    pkg = require.resolve(`${XDS_PACKAGE}/package.json`);
  } catch {
    throw new Error(`typed JSON needs the Envoy API protos from ${XDS_PACKAGE}; run npm install`);
  }
  return path.join(path.dirname(pkg), 'deps');
}
