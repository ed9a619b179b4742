/**
 * Child-process entry of the real gRPC xDS client harness (spawned by
 * test/support/grpc-xds-client.ts as `node dist/test/support/grpc-xds-child.js`).
 *
 * It runs a real `@grpc/grpc-js-xds` client whose bootstrap comes from env
 * GRPC_XDS_BOOTSTRAP_CONFIG, in its own process because grpc-js-xds keeps one
 * XdsClient per process (bootstrap read once, its CSDS registry global).
 * It serves that client's CSDS (gRFC A40) on a free 127.0.0.1 port through
 * grpc-js' admin-service registry, and obeys JSON lines on stdin:
 *
 *   {"id":1,"op":"call","target":"xds:///my-service","timeoutMs":2000,"waitForReady":false}
 *     → {"id":1,"ok":true,"backend":"A"}  |  {"id":1,"ok":false,"code":14,"details":"…"}
 *   {"id":2,"op":"close","target":"xds:///my-service"}  → {"id":2,"ok":true}
 *
 * Its first stdout line is {"event":"ready","csdsPort":N}. stdout carries
 * nothing else; grpc-js logs go to stderr. It exits when stdin closes (the
 * parent went away) or after GRPC_XDS_CHILD_LIFETIME_MS (default 120 s), so it
 * can never outlive a test run.
 */
import * as readline from 'node:readline';
import * as grpc from '@grpc/grpc-js';
import { register } from '@grpc/grpc-js-xds';
import { WHOAMI_PATH } from './echo-backend';

export type ChildRequest =
  | { op: 'call'; target: string; timeoutMs: number; waitForReady: boolean }
  | { op: 'close'; target: string };

export type ChildCommand = ChildRequest & { id: number };

export type ChildReply =
  | { id: number; ok: true; backend?: string }
  | { id: number; ok: false; code: number; details: string };

export type ChildEvent = { event: 'ready'; csdsPort: number } | { event: 'fatal'; message: string };

const passBytes = (b: Buffer): Buffer => b;

function emit(line: ChildReply | ChildEvent): void {
  process.stdout.write(JSON.stringify(line) + '\n');
}

function fatal(message: string): never {
  emit({ event: 'fatal', message });
  process.exit(1);
}

/** One channel per target, kept open between calls like an application's stub. */
const channels = new Map<string, grpc.Client>();

function channelFor(target: string): grpc.Client {
  let c = channels.get(target);
  if (!c) {
    c = new grpc.Client(target, grpc.credentials.createInsecure());
    channels.set(target, c);
  }
  return c;
}

function call(cmd: Extract<ChildCommand, { op: 'call' }>): void {
  let client: grpc.Client;
  try {
    client = channelFor(cmd.target);
  } catch (err) {
    emit({ id: cmd.id, ok: false, code: grpc.status.INVALID_ARGUMENT, details: (err as Error).message });
    return;
  }
  client.makeUnaryRequest(
    WHOAMI_PATH,
    passBytes,
    passBytes,
    Buffer.alloc(0),
    new grpc.Metadata({ waitForReady: cmd.waitForReady }),
    { deadline: Date.now() + cmd.timeoutMs },
    (err: grpc.ServiceError | null, value?: Buffer) => {
      if (err) emit({ id: cmd.id, ok: false, code: err.code, details: err.details });
      else emit({ id: cmd.id, ok: true, backend: (value ?? Buffer.alloc(0)).toString('utf8') });
    },
  );
}

function close(cmd: Extract<ChildCommand, { op: 'close' }>): void {
  channels.get(cmd.target)?.close();
  channels.delete(cmd.target);
  emit({ id: cmd.id, ok: true });
}

function onLine(line: string): void {
  if (line.trim() === '') return;
  let cmd: ChildCommand;
  try {
    cmd = JSON.parse(line) as ChildCommand;
  } catch {
    fatal(`not a JSON command: ${line}`);
  }
  switch (cmd.op) {
    case 'call':
      call(cmd);
      break;
    case 'close':
      close(cmd);
      break;
    default:
      emit({ id: (cmd as { id: number }).id, ok: false, code: grpc.status.UNIMPLEMENTED, details: `unknown op ${JSON.stringify((cmd as { op: unknown }).op)}` });
  }
}

async function main(): Promise<void> {
  if (!process.env.GRPC_XDS_BOOTSTRAP_CONFIG && !process.env.GRPC_XDS_BOOTSTRAP) {
    fatal('GRPC_XDS_BOOTSTRAP_CONFIG is not set');
  }
  const lifetimeMs = Number(process.env.GRPC_XDS_CHILD_LIFETIME_MS ?? 120_000);
  setTimeout(() => {
    process.stderr.write(`grpc-xds-child: lifetime of ${lifetimeMs} ms is over, exiting\n`);
    process.exit(3);
  }, lifetimeMs).unref();

  register();
  // CSDS is registered by register() as a grpc-js admin service.
  const admin = new grpc.Server();
  grpc.addAdminServicesToServer(admin);
  const csdsPort = await new Promise<number>((resolve, reject) =>
    admin.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))),
  );

  const rl = readline.createInterface({ input: process.stdin });
  rl.on('line', onLine);
  rl.on('close', () => process.exit(0));
  emit({ event: 'ready', csdsPort });
}

process.on('uncaughtException', (err) => fatal(`uncaught: ${err.stack ?? err.message}`));
main().catch((err: Error) => fatal(err.stack ?? err.message));
